"""Lite refuses a store another live scheduler leads, naming it; a dead one's it takes."""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

from .conftest import LEOFLOW, REPO


def _holder(home: Path) -> str | None:
    try:
        with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
            row = db.execute("SELECT holder FROM scheduler_lease").fetchone()
    except sqlite3.OperationalError:
        return None  # not created yet
    return None if row is None else str(row[0])


def _wait_holder(home: Path, want: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if _holder(home) == want:
            return
        assert proc.poll() is None, "the scheduler exited"
        time.sleep(0.05)
    raise AssertionError(f"{want!r} never held the lease (holder {_holder(home)!r})")


def _scheduler(env: dict[str, str], tmp_path: Path, **extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [LEOFLOW, "scheduler"],
        env={**env, "LEOFLOW_AGENT_LISTEN": "127.0.0.1:0", **extra},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "scheduler.err", "wb"),
    )


def _lite(
    env: dict[str, str], folder: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LEOFLOW, "lite", "--dags", str(folder), "--no-api"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_lite_refuses_a_store_a_live_scheduler_leads(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    sched = _scheduler(env, tmp_path, LEOFLOW_IDENTITY="vm-1/4242")
    try:
        _wait_holder(home, "vm-1/4242", sched)
        result = _lite(env, folder)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("leoflow lite: the store ")
        assert "led by another live scheduler, vm-1/4242" in lines[0]
        assert _holder(home) == "vm-1/4242"
    finally:
        sched.send_signal(signal.SIGTERM)
        assert sched.wait(60) == 0
    assert _holder(home) == ""  # released on SIGTERM


def test_lite_takes_over_from_a_killed_scheduler_of_this_host_at_once(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    sched = _scheduler(env, tmp_path)  # default identity: <host>-<pid>
    identity = f"{socket.gethostname()}-{sched.pid}"
    _wait_holder(home, identity, sched)
    sched.kill()
    sched.wait(60)
    lite = subprocess.Popen(
        [LEOFLOW, "lite", "--dags", str(folder), "--no-api"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert lite.stdout is not None
        ready = lite.stdout.readline().decode()  # once serving, SIGTERM stops it cleanly
        assert "Ctrl-C stops" in ready, ready
        assert _holder(home) == f"{socket.gethostname()}-{lite.pid}"
    finally:
        lite.send_signal(signal.SIGTERM)
        _, err = lite.communicate(timeout=60)
    assert lite.returncode == 0, err.decode()
    assert _holder(home) == ""
