"""A ``leoflow lite`` process for end-to-end tests: start it, wait on a condition,
stop it (SIGINT, then SIGKILL)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LEOFLOW = str(Path(sys.executable).parent / "leoflow")


def start_lite(
    env: dict[str, str], folder: Path, out: Path, *, before: Any = None, **extra: str
) -> subprocess.Popen[str]:
    """``leoflow lite --dags folder`` with ``env`` and ``extra``; its output in ``out``.
    ``before`` runs in the child before exec (``preexec_fn``)."""
    return subprocess.Popen(
        [LEOFLOW, "lite", "--dags", str(folder)],
        env={**env, "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2", **extra},
        cwd=REPO,
        stdout=open(out, "w"),
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=before,
    )


def stop(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait(predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Poll ``predicate`` until true; a database still being created counts as false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
