"""A run of part of a dbt DAG: ``leoflow trigger --conf '{"dbt_select": ...}'`` against a live
API, on the shop fixture project loaded with the real ``dbt parse`` (``.venv-dbt``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from leoflow.api.server import RunningApi
from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dbt.project import expander
from leoflow.store import Store
from tests.integration.api import test_cli
from tests.integration.api.test_cli import cli
from tests.support.dbt import SHOP_NODES, copy_project, dbt_bin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # dbt parse, the CLI
live = test_cli.live  # the API serving on a real socket


async def _put_shop(store: Store, tmp_path: Path, tests: str = "after_model") -> None:
    copy_project(tmp_path, "shop")
    dag = tmp_path / "shop.yaml"
    dag.write_text(
        f"dag_id: shop\ntasks:\n  extract_orders: {{command: 'echo extract'}}\n"
        f"  report: {{command: 'echo report', depends_on: [dbt.customer_revenue]}}\n"
        f"dbt:\n  project_dir: shop\n  profiles_dir: profiles\n  executable: {dbt_bin()}\n"
        f"  tests: {tests}\n  depends_on: {{'source:shop.orders': [extract_orders]}}\n"
        "  defaults: {env: {SHOP_DUCKDB_PATH: /nowhere, LEOFLOW_SECRET_WAREHOUSE_PASSWORD: x}}\n"
    )
    loaded = load_dag_file(dag, LoadOptions(dbt=expander(tmp_path / "cache")))
    spec_json = loaded.spec.model_dump_json()
    await store.upsert_dag(
        "shop",
        fileloc=str(dag),
        spec_json=spec_json,
        spec_hash=hashlib.sha256(spec_json.encode()).hexdigest(),
        source=loaded.source,
    )


async def _run_tasks(store: Store, run_id: str) -> set[str]:
    run = await store.find_run("shop", run_id)
    assert run is not None
    return {ti.task_id for ti in await store.list_task_instances(run_pk=run.pk)}


async def test_a_conf_selection_makes_a_run_of_the_matching_dbt_tasks_and_every_other_task(
    live: RunningApi, store: Store, tmp_path: Path
) -> None:
    await _put_shop(store, tmp_path)
    conf = json.dumps({"dbt_select": "tag:staging", "dbt_exclude": ["stg_payments"]})
    code, out, err = await cli(live, "trigger", "shop", "--conf", conf, "--run-id", "staging")
    assert code == 0, out + err
    tasks = await _run_tasks(store, "staging")
    dbt_tasks = {t for t in tasks if t.startswith("dbt.")}
    # The staging models but the excluded one, and the tests of those models alone
    # (dbt's indirect selection); the ordinary tasks stay.
    assert {t for t in dbt_tasks if not t.startswith("dbt.test.")} == {
        "dbt.stg_customers",
        "dbt.stg_orders",
    }
    tests = {t for t in dbt_tasks if t.startswith("dbt.test.")}
    assert tests and all("stg_payments" not in t for t in tests), tests
    assert any("relationships" in t for t in tests), tests  # both its models are selected
    assert {"extract_orders", "report"} <= tasks

    code, out, err = await cli(
        live, "trigger", "shop", "--conf", '{"dbt_select": "+customer_revenue"}', "--run-id", "up"
    )
    assert code == 0, out + err
    up = {t for t in await _run_tasks(store, "up") if not t.startswith("dbt.test.")}
    # Not the snapshot: it is beside customer_revenue, not above it.
    beside = {"dbt.customers_snapshot", "dbt.tests"}
    assert up == {"extract_orders", "report", *SHOP_NODES} - beside


async def test_a_selection_leoflow_cannot_evaluate_or_that_matches_nothing_makes_no_run(
    live: RunningApi, store: Store, tmp_path: Path
) -> None:
    await _put_shop(store, tmp_path, tests="after_all")
    code, _, err = await cli(live, "trigger", "shop", "--conf", '{"dbt_select": "state:modified"}')
    assert code == 1
    assert "400" in err and "conf.dbt_select: selector method 'state'" in err, err
    code, _, err = await cli(live, "trigger", "shop", "--conf", '{"dbt_exclude": "tag:"}')
    assert code == 1 and "conf.dbt_exclude: selector 'tag:' has no value" in err, err
    code, _, err = await cli(live, "trigger", "shop", "--conf", '{"dbt_select": "no_such_model"}')
    assert code == 1 and "conf.dbt_select: selects no dbt task of DAG 'shop'" in err, err
    code, _, err = await cli(live, "trigger", "shop", "--conf", '{"dbt_select": 3}')
    assert code == 1 and "conf.dbt_select: expected a dbt selector string" in err, err
    assert await store.list_runs(dag_id="shop") == []  # nothing half-made

    # With tests: after_all, the one tests task comes along when tests are selected.
    code, out, err = await cli(
        live, "trigger", "shop", "--conf", '{"dbt_select": "raw_customers+1"}', "--run-id", "r"
    )
    assert code == 0, out + err
    assert await _run_tasks(store, "r") == {
        "extract_orders",
        "report",
        "dbt.raw_customers",
        "dbt.stg_customers",
        "dbt.customers_snapshot",
        "dbt.tests",
    }
