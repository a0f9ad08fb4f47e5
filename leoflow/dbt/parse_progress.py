"""Running ``dbt parse`` while saying so: a full parse of a project takes seconds to
minutes (33 s of a small project on a busy host), and a command that prints nothing
meanwhile reads as hung. The lines go to a callback (the CLI's stderr), never stdout,
so ``--json`` output stays one document."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

Progress = Callable[[str], None]
# How often a parse still under way is said to be; the first line comes at its start.
PROGRESS_EVERY = 10.0


class ParseTimedOut(Exception):
    """dbt parse ran past its bound and was killed."""


def run_parse(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    progress: Progress | None,
) -> tuple[int, str]:
    """dbt's exit code and output (stdout then stderr); FileNotFoundError when the
    executable is missing, ParseTimedOut past ``timeout`` seconds."""
    say = progress or (lambda line: None)
    say(f"dbt parse of {cwd}: no fresh manifest, building one (cached for the next load)")
    started = time.monotonic()
    with subprocess.Popen(
        list(argv),
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                # communicate() may be called again after a timeout without losing output.
                out, err = proc.communicate(timeout=max(0.0, min(PROGRESS_EVERY, left)))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() - started >= timeout:
                    proc.kill()
                    proc.communicate()
                    raise ParseTimedOut from None
                say(f"dbt parse of {cwd}: still parsing ({time.monotonic() - started:.0f}s)")
    say(f"dbt parse of {cwd}: done in {time.monotonic() - started:.1f}s (exit {proc.returncode})")
    return proc.returncode, out + err
