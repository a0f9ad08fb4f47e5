"""dbt projects as DAGs, end to end: ``leoflow run`` on the fixture projects with the real
dbt (``.venv-dbt``), real agents and a real DuckDB file.

dbt starts in seconds per task on a loaded machine, hence the long timeouts; DuckDB
takes one writer at a time, hence ``max_active_tasks: 1``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.dbt import (
    SHOP_NODES,
    assert_shop_built,
    broken_dag,
    copy_project,
    dbt_bin,
    query,
)

from .conftest import LEOFLOW, Leoflow

pytestmark = pytest.mark.timeout(900)


def _tree(root: Path) -> dict[str, tuple[int, float]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime)
        for p in sorted(root.rglob("*"))
    }


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _tasks(home: Path) -> dict[str, tuple[str, int, str | None]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        rows = db.execute("select task_id, state, try_number, message from task_instances")
        return {task: (state, tries, message) for task, state, tries, message in rows}


def _query(home: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        return db.execute(sql).fetchall()


def _secret(home: Path, name: str, value: str) -> None:
    (home / "secrets").mkdir(exist_ok=True)
    (home / "secrets" / name).write_text(value)


def test_a_hybrid_dag_builds_the_shop_project_from_a_read_only_copy(
    leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    project = copy_project(tmp_path, "shop")
    database = tmp_path / "shop.duckdb"
    _secret(home, "warehouse_password", "s3cret")
    (tmp_path / "shop.yaml").write_text(
        f"""
dag_id: shop
max_active_tasks: 1
tasks:
  extract_orders:
    command: ["{dbt_bin("python")}", "{tmp_path / "extract_orders.py"}", "{database}"]
  report:
    command: "echo report read the revenue"
    depends_on: [dbt.customer_revenue]
dbt:
  project_dir: shop
  profiles_dir: profiles
  executable: {dbt_bin()}
  tests: after_all
  depends_on:
    source:shop.orders: [extract_orders]
  defaults:
    env: {{SHOP_DUCKDB_PATH: "{database}"}}
    secrets: [warehouse_password]
"""
    )
    _read_only(project)
    _read_only(tmp_path / "profiles")
    before = _tree(project)

    done = leoflow("run", str(tmp_path / "shop.yaml"), timeout=840)

    assert done.returncode == 0, done.stdout + done.stderr
    tasks = _tasks(home)
    assert {t: s for t, (s, _, _) in tasks.items()} == dict.fromkeys(
        [
            "extract_orders",
            "report",
            *SHOP_NODES,
        ],
        "success",
    )
    assert_shop_built(database)
    views = query(
        database,
        "select table_name from information_schema.tables where table_type = 'VIEW' order by 1",
    )
    assert views == [("stg_customers",), ("stg_orders",), ("stg_payments",)]
    # Nothing was written into the project: target/, logs/ and partial parses went to
    # /tmp (the tasks) and LEOFLOW_HOME (the load-time parse).
    assert _tree(project) == before
    assert not (project / "target").exists() and not (project / "logs").exists()
    assert os.path.isdir("/tmp/leoflow-dbt/shop/dbt.stg_orders/target")


def test_a_failing_model_and_a_failing_test_fail_their_tasks_and_block_only_their_downstream(
    leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    database = tmp_path / "broken.duckdb"
    done = leoflow("run", str(broken_dag(tmp_path, "broken", database)), timeout=840)

    assert done.returncode == 1, done.stdout + done.stderr
    tasks = _tasks(home)
    test_task = next(t for t in tasks if t.startswith("dbt.test.accepted_values_tested_n"))
    assert {t: s for t, (s, _, _) in tasks.items()} == {
        "dbt.numbers": "success",
        "dbt.bad_model": "failed",
        "dbt.after_bad": "upstream_failed",
        "dbt.tested": "success",
        test_task: "failed",
        "dbt.after_tested": "upstream_failed",
        "dbt.independent": "success",
    }
    # The reason names the node and carries dbt's own error line, not just "exit 1".
    bad = tasks["dbt.bad_model"][2] or ""
    assert bad.startswith("dbt model bad_model failed: "), bad
    assert "no_such_column" in bad, bad
    assert "(exited with code 1)" in bad, bad
    failed_test = tasks[test_task][2] or ""
    assert failed_test.startswith("dbt test accepted_values_tested_n"), failed_test
    assert "Got 1 result, configured to fail if != 0" in failed_test, failed_test
    assert query(database, "select answer from independent") == [(42,)]


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.OperationalError):
            if predicate():
                return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_clearing_one_model_reruns_only_that_model(
    env: dict[str, str], leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    copy_project(tmp_path, "broken")
    database = tmp_path / "broken.duckdb"
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "pair.yaml").write_text(
        f"""
dag_id: pair
max_active_tasks: 1
dbt:
  project_dir: ../broken
  profiles_dir: ../profiles
  executable: {dbt_bin()}
  select: ["numbers+1"]
  exclude: ["bad_model"]
  tests: none
  defaults:
    env: {{SHOP_DUCKDB_PATH: "{database}"}}
"""
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    lite_env = {**env, "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"}
    lite_env["LEOFLOW_API_LISTEN"] = f"127.0.0.1:{port}"
    with open(tmp_path / "lite.out", "w") as out:
        proc = subprocess.Popen(
            [LEOFLOW, "lite", "--dags", str(folder)], env=lite_env, stdout=out, stderr=out
        )
    try:
        _wait(
            lambda: (
                leoflow("trigger", "pair", "--run-id", "r1", "--server", server).returncode == 0
            ),
            "the DAG to load and take a run",
            120,
        )
        finished = {"dbt.numbers", "dbt.tested"}
        _wait(
            lambda: {t for t, (s, _, _) in _tasks(home).items() if s == "success"} == finished,
            "the first run",
        )
        _wait(lambda: _query(home, "select state from dag_runs") == [("success",)], "the run end")
        cleared = leoflow("clear", "pair", "r1", "dbt.tested", "--server", server)
        assert cleared.returncode == 0, cleared.stdout + cleared.stderr
        _wait(
            lambda: _tasks(home)["dbt.tested"][:2] == ("success", 2),
            "dbt.tested to run again",
        )
        tasks = _tasks(home)
        assert tasks["dbt.numbers"][:2] == ("success", 1)  # not run again
        assert query(database, "select count(*) from tested") == [(3,)]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
