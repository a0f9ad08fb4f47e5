"""A dbt model is an asset without a line of the author's: in Lite, with the real dbt
(``.venv-dbt``) and DuckDB, the success of a dbt DAG's model triggers, exactly once, a
DAG scheduled on that model's relation (``duckdb://shop/main.stg_customers``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.e2e.test_assets_lite import _lite, _ready
from tests.support.dbt import copy_project, dbt_bin
from tests.support.lite_proc import stop, wait
from tests.support.net import free_port

from .conftest import Leoflow

pytestmark = pytest.mark.timeout(900)

DOWNSTREAM = """
dag_id: customers_report
schedule: {assets: ["duckdb://shop/main.stg_customers"]}
tasks:
  report:
    command: 'echo "$LEOFLOW_TRIGGERING_ASSET_EVENTS"'
"""


def _runs(home: Path) -> dict[str, list[tuple[str, str]]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        rows = db.execute("SELECT dag_id, run_type, state FROM dag_runs ORDER BY pk").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for dag_id, run_type, state in rows:
        out.setdefault(dag_id, []).append((run_type, state))
    return out


def _events(home: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        rows = db.execute("SELECT uri, dag_id, task_id FROM asset_events ORDER BY pk").fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def test_a_dbt_model_s_success_triggers_the_dag_scheduled_on_its_relation_once(
    env: dict[str, str], home: Path, tmp_path: Path, leoflow: Leoflow
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    copy_project(folder, "shop")
    (home / "secrets").mkdir()
    (home / "secrets" / "warehouse_password").write_text("s3cret")
    (folder / "shop.yaml").write_text(
        f"""
dag_id: shop
max_active_tasks: 1
dbt:
  project_dir: shop
  profiles_dir: profiles
  executable: {dbt_bin()}
  tests: none
  select: [raw_customers, stg_customers]
  defaults:
    env: {{SHOP_DUCKDB_PATH: "{tmp_path / "shop.duckdb"}"}}
    secrets: [warehouse_password]
"""
    )
    (folder / "report.yaml").write_text(DOWNSTREAM)
    env["LEOFLOW_SERVER"] = f"http://127.0.0.1:{free_port()}"
    proc = _lite(env, folder, tmp_path / "lite.out")
    try:
        _ready(tmp_path / "lite.out")
        done = leoflow("trigger", "shop")
        assert done.returncode == 0, done.stdout + done.stderr
        wait(
            lambda: _runs(home).get("customers_report") == [("asset", "success")],
            "the report's asset-triggered run",
            timeout=600,
        )
        assert _runs(home)["shop"] == [("manual", "success")]
        assert _events(home) == [
            ("duckdb://shop/main.raw_customers", "shop", "dbt.raw_customers"),
            ("duckdb://shop/main.stg_customers", "shop", "dbt.stg_customers"),
        ]
        # A second build triggers a second report, and only one.
        done = leoflow("trigger", "shop")
        assert done.returncode == 0, done.stdout + done.stderr
        wait(
            lambda: _runs(home).get("customers_report") == [("asset", "success")] * 2,
            "the second report",
            timeout=600,
        )
        wait(lambda: _runs(home)["shop"] == [("manual", "success")] * 2, "the second build")
        assert _runs(home)["customers_report"] == [("asset", "success")] * 2
    finally:
        stop(proc)
