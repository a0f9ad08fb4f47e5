"""A full disk under `leoflow lite`: it holds on, says which path is full and what to
do, starts nothing new, and once space is back finishes with every byte of output.

The disk is a real one: a 24 MB tmpfs mounted as LEOFLOW_HOME (the test runs as root,
as CI does), filled with a ballast file while a task writes more output than is left
(ENOSPC, SQLITE_FULL), then emptied by deleting the ballast.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LEOFLOW, REPO
from tests.support.tmpfs import fill, mounted_tmpfs

LINES = 1_000_000  # `seq 1 1000000`: 6.9 MB of output, five times the space left
FREE_WHILE_FULL = 1_000_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk", "24m") as mount:
        yield mount


def _query(home: Path, sql: str) -> list[tuple[Any, ...]]:  # sqlite3 rows
    with sqlite3.connect(home / "leoflow.db", timeout=30) as db:
        return db.execute(sql).fetchall()


def _wait(predicate: Callable[[], object], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (sqlite3.OperationalError, IndexError):
            pass  # the database is still being created
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


FIRST_RUN = "(SELECT min(pk) FROM dag_runs)"


def _state(home: Path, task_id: str) -> object:
    return _query(
        home,
        f"SELECT state FROM task_instances WHERE run_pk = {FIRST_RUN} AND task_id = '{task_id}'",
    )[0][0]


@pytest.mark.parametrize("executor", ["agent", "subprocess"])
def test_a_full_disk_holds_lite_and_loses_no_output(
    small_disk: Path, env: dict[str, str], tmp_path: Path, executor: str
) -> None:
    home = small_disk
    folder = tmp_path / "dags"
    folder.mkdir()
    go = tmp_path / "go"
    start = (datetime.now(UTC) - timedelta(seconds=70)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (folder / "full.yaml").write_text(
        f"dag_id: full\nschedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\n"
        "max_active_runs: 1\ntasks:\n"
        f"  big: {{command: 'while [ ! -e {go} ]; do sleep 0.1; done; seq 1 {LINES}; echo END'}}\n"
        "  after: {command: 'echo after', depends_on: [big]}\n"
    )
    output = tmp_path / "lite.out"
    proc = subprocess.Popen(
        [LEOFLOW, "lite", "--dags", str(folder), "--no-api", "--executor", executor],
        env={**env, "LEOFLOW_HOME": str(home), "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"},
        cwd=REPO,
        stdout=open(output, "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(lambda: _state(home, "big") == "running", "the big task to start")
        ballast = fill(home, FREE_WHILE_FULL)
        go.touch()
        _wait(lambda: "is full" in output.read_text(), "Lite to say the disk is full")

        said = output.read_text()
        assert proc.poll() is None, said
        full_lines = [line for line in said.splitlines() if "is full" in line]
        assert len(full_lines) == 1, said
        assert f"the disk holding {home / 'leoflow.db'} is full" in full_lines[0]
        assert "free space there" in full_lines[0]
        # While the output cannot be written the task cannot be done, nor its downstream go.
        assert _state(home, "big") == "running"
        assert _state(home, "after") == "none"

        ballast.unlink()
        _wait(
            lambda: _query(home, "SELECT state FROM dag_runs ORDER BY pk")[0][0] == "success",
            "the run to finish once space is back",
        )
        assert proc.poll() is None, output.read_text()
        log = b"".join(
            bytes(row[0])
            for row in _query(
                home,
                "SELECT data FROM log_chunks WHERE ti_pk = (SELECT pk FROM task_instances "
                f"WHERE run_pk = {FIRST_RUN} AND task_id = 'big') ORDER BY try_number, seq",
            )
        )
        expected = "".join(f"{i}\n" for i in range(1, LINES + 1)).encode() + b"END\n"
        assert len(log) == len(expected)
        assert log == expected
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    said = output.read_text()
    assert "has space again" in said, said
    assert "Traceback" not in said, said


@pytest.mark.parametrize("executor", ["agent", "subprocess"])
def test_sigterm_while_the_disk_is_full_stops_lite_promptly(
    small_disk: Path, env: dict[str, str], tmp_path: Path, executor: str
) -> None:
    home = small_disk
    folder = tmp_path / "dags"
    folder.mkdir()
    go = tmp_path / "go"
    (folder / "full.yaml").write_text(
        "dag_id: full\nschedule: '* * * * *'\ncatchup: true\n"
        f"start_date: '{(datetime.now(UTC) - timedelta(seconds=70)):%Y-%m-%dT%H:%M:%SZ}'\n"
        "max_active_runs: 1\ntasks:\n"
        f"  big: {{command: 'while [ ! -e {go} ]; do sleep 0.1; done; seq 1 {LINES}; sleep 60'}}\n"
    )
    output = tmp_path / "lite.out"
    proc = subprocess.Popen(
        [LEOFLOW, "lite", "--dags", str(folder), "--no-api", "--executor", executor],
        env={**env, "LEOFLOW_HOME": str(home), "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"},
        cwd=REPO,
        stdout=open(output, "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(lambda: _state(home, "big") == "running", "the big task to start")
        fill(home, FREE_WHILE_FULL)
        go.touch()
        _wait(lambda: "is full" in output.read_text(), "Lite to say the disk is full")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    said = output.read_text()
    assert elapsed < 10.0, said  # generous: it takes about 2 s
    assert "leoflow lite: stopped; 1 running task killed (big)" in said, said
    assert "Traceback" not in said, said
