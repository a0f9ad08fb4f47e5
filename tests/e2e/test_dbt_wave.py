"""``dbt.batch: wave`` end to end: ``leoflow run`` with the real dbt (``.venv-dbt``) on the
fixture projects. The models of a wave share one dbt invocation, yet every task ends
with its own node's state and reason.

``max_active_tasks: 1`` (DuckDB takes one writer): the leader of a wave runs its
peers' nodes, and each peer then finds its result filed when its turn comes.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.dbt import (
    SHOP_NODES,
    assert_shop_built,
    broken_dag,
    copy_project,
    dbt_bin,
    query,
)

from .conftest import Leoflow
from .test_dbt import _tasks

pytestmark = pytest.mark.timeout(900)


def _batches(dag_id: str) -> list[dict[str, Any]]:
    """What the leaders filed: one file per dbt invocation that ran a wave."""
    runs = Path("/tmp/leoflow-dbt") / dag_id / "runs"
    out = []
    for path in sorted(runs.glob("*/batch-*.json")):
        data = json.loads(path.read_text())
        data["leader"] = path.stem.removeprefix("batch-")
        out.append(data)
    return out


def _assert_peers_ran_no_dbt(dag_id: str, batches: list[dict[str, Any]]) -> None:
    """Only a batch's leader ran dbt: its peers took their results from its invocation."""
    for batch in batches:
        for member in batch["results"]:
            ran = (
                Path("/tmp/leoflow-dbt") / dag_id / member / "target" / "run_results.json"
            ).exists()
            assert ran == (member == batch["leader"]), (member, batch["leader"])


def _dag_id(prefix: str) -> str:
    dag_id = f"{prefix}_{uuid.uuid4().hex[:8]}"
    shutil.rmtree(Path("/tmp/leoflow-dbt") / dag_id, ignore_errors=True)
    return dag_id


def test_a_wave_dag_builds_the_shop_project_with_one_dbt_invocation_per_wave(
    leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    copy_project(tmp_path, "shop")
    database = tmp_path / "shop.duckdb"
    dag_id = _dag_id("shop_wave")
    (tmp_path / "shop.yaml").write_text(
        f"""
dag_id: {dag_id}
max_active_tasks: 1
tasks:
  extract_orders:
    command: ["{dbt_bin("python")}", "{tmp_path / "extract_orders.py"}", "{database}"]
dbt:
  project_dir: shop
  profiles_dir: profiles
  executable: {dbt_bin()}
  tests: after_all
  batch: wave
  depends_on:
    source:shop.orders: [extract_orders]
  defaults:
    env: {{SHOP_DUCKDB_PATH: "{database}", LEOFLOW_SECRET_WAREHOUSE_PASSWORD: x}}
"""
    )

    done = leoflow("run", str(tmp_path / "shop.yaml"), timeout=840)

    assert done.returncode == 0, done.stdout + done.stderr
    states = {t: s for t, (s, _, _) in _tasks(home).items()}
    assert states == dict.fromkeys(
        [
            "extract_orders",
            *SHOP_NODES,
        ],
        "success",
    )
    assert_shop_built(database)
    batches = _batches(dag_id)
    grouped = [sorted(b["results"]) for b in batches]
    # Both seeds in one invocation; the three nodes that read only seeds in another.
    assert ["dbt.raw_customers", "dbt.raw_payments"] in grouped, grouped
    assert ["dbt.customers_snapshot", "dbt.stg_customers", "dbt.stg_payments"] in grouped, grouped
    assert all(b["done"] and all(r["ok"] for r in b["results"].values()) for b in batches)
    _assert_peers_ran_no_dbt(dag_id, batches)
    # stg_orders waits for extract_orders, which no seed waits for: never batched with them.
    assert not any("dbt.stg_orders" in g and "dbt.raw_customers" in g for g in grouped)


def test_a_failing_model_in_a_wave_fails_only_its_task_and_blocks_only_its_downstream(
    leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    database = tmp_path / "broken.duckdb"
    dag_id = _dag_id("broken_wave")
    dag = broken_dag(tmp_path, dag_id, database, "  batch: wave\n")
    done = leoflow("run", str(dag), timeout=840)

    assert done.returncode == 1, done.stdout + done.stderr
    tasks = _tasks(home)
    test_task = next(t for t in tasks if t.startswith("dbt.test.accepted_values_tested_n"))
    assert {t: s for t, (s, _, _) in tasks.items()} == {
        "dbt.numbers": "success",
        "dbt.independent": "success",
        "dbt.bad_model": "failed",
        "dbt.tested": "success",
        "dbt.after_bad": "upstream_failed",
        test_task: "failed",
        "dbt.after_tested": "upstream_failed",
    }
    grouped = {tuple(sorted(b["results"])): b for b in _batches(dag_id)}
    assert ("dbt.bad_model", "dbt.tested") in grouped, list(grouped)
    _assert_peers_ran_no_dbt(dag_id, list(grouped.values()))
    wave = grouped[("dbt.bad_model", "dbt.tested")]["results"]
    assert wave["dbt.tested"]["ok"] and not wave["dbt.bad_model"]["ok"]
    # The failed model's reason is dbt's own, whichever of the two led the invocation.
    bad = tasks["dbt.bad_model"][2] or ""
    assert bad.startswith("dbt model bad_model failed: "), bad
    assert "no_such_column" in bad, bad
    assert query(database, "select n from tested order by 1") == [(1,), (2,), (3,)]
    assert query(database, "select answer from independent") == [(42,)]
