"""`leoflow lite` as a long-running process: cron runs, broken files, kill -9 and restart."""

from __future__ import annotations

import os
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
from tests.support.lite_proc import wait

# Other modules import it from here (test_hostile_dags).
_wait = wait


def _cron_dag(dag_id: str, body: str) -> str:
    start = (datetime.now(UTC) - timedelta(seconds=70)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # catchup from a minute ago: the scheduler owes exactly the runs since then, at once.
    return (
        f"dag_id: {dag_id}\nschedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\n"
        f"max_active_runs: 1\ntasks:\n{body}"
    )


def _query(home: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:  # sqlite3 rows
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        return db.execute(sql, args).fetchall()


StartLite = Callable[[Path], subprocess.Popen[str]]


@pytest.fixture
def lite(env: dict[str, str], tmp_path: Path) -> Iterator[StartLite]:
    procs: list[subprocess.Popen[str]] = []

    def start(folder: Path) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [LEOFLOW, "lite", "--dags", str(folder), "--no-api"],
            env={**env, "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"},
            cwd=REPO,
            stdout=open(tmp_path / f"lite-{len(procs)}.out", "w"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_killed_lite_restarts_and_finishes_the_run(
    lite: StartLite, home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    marker = tmp_path / "middle-started"
    body = (
        "  first: {command: 'echo first'}\n"
        f"  middle: {{command: '[ -e {marker} ] && exit 0; touch {marker}; sleep 60', "
        "depends_on: [first]}\n"
        "  last: {command: 'echo last', depends_on: [middle]}\n"
    )
    (folder / "chain.yaml").write_text(_cron_dag("chain", body))
    proc = lite(folder)
    _wait(marker.exists, "the middle task to start")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    (run_pk,) = _query(home, "select pk from dag_runs where dag_id='chain' order by pk limit 1")[0]
    assert _query(
        home, "select state from task_instances where run_pk=? and task_id='middle'", run_pk
    ) == [("running",)]

    lite(folder)
    _wait(
        lambda: _query(home, "select state from dag_runs where pk=?", run_pk) == [("success",)],
        "the run to finish after the restart",
    )
    rows = dict(
        (task, (state, tries))
        for task, state, tries in _query(
            home, "select task_id, state, try_number from task_instances where run_pk=?", run_pk
        )
    )
    assert rows == {"first": ("success", 1), "middle": ("success", 2), "last": ("success", 1)}


def test_a_broken_file_is_reported_and_the_other_dags_keep_running(
    lite: StartLite, home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "good.yaml").write_text(_cron_dag("good", "  a: {command: 'echo fine'}\n"))
    (folder / "bad.yaml").write_text(
        "dag_id: bad\ntasks:\n  a: {command: 'x', depends_on: [ghost]}\n"
    )
    lite(folder)
    _wait(
        lambda: ("success",) in _query(home, "select state from dag_runs where dag_id='good'"),
        "a run of the good DAG",
    )
    errors = _query(home, "select fileloc, error from dag_import_errors")
    assert [(loc, "unknown task 'ghost'" in err) for loc, err in errors] == [
        (str(folder / "bad.yaml"), True)
    ]
    output = (tmp_path / "lite-0.out").read_text()
    assert "error: DAG file skipped, other DAGs keep running" in output
    assert f"{folder / 'bad.yaml'}:3: tasks.a.depends_on.0: unknown task 'ghost'" in output

    # Breaking the good file keeps its last good definition; fixing the bad one adds it.
    (folder / "good.yaml").write_text("dag_id: good\ntasks: [not, a, mapping]\n")
    (folder / "bad.yaml").write_text(_cron_dag("bad", "  a: {command: 'echo fixed'}\n"))
    _wait(
        lambda: ("success",) in _query(home, "select state from dag_runs where dag_id='bad'"),
        "a run of the fixed DAG",
    )
    assert _query(home, "select active from dags where dag_id='good'") == [(1,)]
    assert "fixed: " + str(folder / "bad.yaml") in (tmp_path / "lite-0.out").read_text()


def test_a_dag_using_a_missing_pool_waits_as_an_error_until_the_pool_exists(
    lite: StartLite, home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "pooled.yaml").write_text(
        _cron_dag("pooled", "  load: {command: 'echo loaded', pool: warehouse}\n")
    )
    lite(folder)
    _wait(
        lambda: _query(home, "select error from dag_import_errors") != [],
        "the missing pool to be reported",
    )
    ((error,),) = _query(home, "select error from dag_import_errors")
    assert "tasks.load.pool: unknown pool 'warehouse'" in str(error)
    assert _query(home, "select count(*) from dag_runs") == [(0,)]
    # An operator creates the pool (as the API would): the file loads, the run goes.
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        db.execute(
            "insert into pools (name, slots, description, updated_at) values (?, ?, ?, ?)",
            ("warehouse", 1, "", time.time()),
        )
    _wait(
        lambda: ("success",) in _query(home, "select state from dag_runs where dag_id='pooled'"),
        "a run once the pool exists",
    )
    assert _query(home, "select error from dag_import_errors") == []
