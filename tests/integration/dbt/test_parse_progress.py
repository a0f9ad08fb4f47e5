"""dbt parse says it is running: a line at its start, one every PROGRESS_EVERY seconds
while it runs, one with its time and exit code at its end, all to the callback (the
CLI's stderr), none to stdout. Real processes stand in for dbt."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from leoflow.dbt import parse_progress
from leoflow.dbt.parse_progress import ParseTimedOut, run_parse


def test_a_parse_is_announced_and_its_end_and_exit_code_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said: list[str] = []
    code, output = run_parse(
        [sys.executable, "-c", "print('parsed'); raise SystemExit(3)"],
        env={},
        cwd=tmp_path,
        timeout=60,
        progress=said.append,
    )
    assert (code, output) == (3, "parsed\n")
    assert (
        said[0]
        == f"dbt parse of {tmp_path}: no fresh manifest, building one (cached for the next load)"
    )
    assert said[-1].startswith(f"dbt parse of {tmp_path}: done in ")
    assert said[-1].endswith("s (exit 3)")
    assert capsys.readouterr().out == ""  # nothing of it on stdout


def test_a_long_parse_is_said_to_be_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parse blocks until its stdin-less peer file appears, which the progress
    # callback writes: the "still parsing" line is what lets it finish.
    monkeypatch.setattr(parse_progress, "PROGRESS_EVERY", 0.05)
    gate = tmp_path / "gate"
    waiter = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)"
    said: list[str] = []

    def progress(line: str) -> None:
        said.append(line)
        if "still parsing" in line:
            gate.touch()

    code, _ = run_parse(
        [sys.executable, "-c", waiter], env={}, cwd=tmp_path, timeout=60, progress=progress
    )
    assert code == 0
    assert any(f"dbt parse of {tmp_path}: still parsing (" in line for line in said), said


def test_a_parse_past_its_bound_is_killed(tmp_path: Path) -> None:
    with pytest.raises(ParseTimedOut):
        run_parse(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            env={},
            cwd=tmp_path,
            timeout=0.5,
            progress=None,
        )


def test_a_missing_executable_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_parse([str(tmp_path / "no-dbt")], env={}, cwd=tmp_path, timeout=60, progress=None)
