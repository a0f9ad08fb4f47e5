"""A dbt task's OpenLineage facets, read from the files dbt wrote (real files on disk)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leoflow.domain.dag import DagSpec
from leoflow.domain.lineage import Subject, run_event
from leoflow.scheduler.lineage_dbt import DbtFacts
from tests.support.openlineage import validate

ORDERS, STG = "duckdb://shop/main.orders", "duckdb://shop/main.stg_orders"


def _node(name: str, **more: Any) -> dict[str, Any]:
    return {"resource_type": "model", "database": "shop", "schema": "main", "alias": name,
            "name": name, **more}  # fmt: skip


MANIFEST = {
    "metadata": {"adapter_type": "duckdb"},
    "nodes": {
        "model.shop.orders": _node(
            "orders",
            raw_code="select * from {{ ref('stg_orders') }}",
            columns={
                "id": {"name": "id", "data_type": "integer", "description": "the order"},
                "total": {"name": "total"},
            },
            meta={"column_lineage": {"total": [{"asset": STG, "column": "amount"}]}},
        ),
        "model.shop.stg_orders": _node("stg_orders", columns={"amount": {"data_type": "double"}}),
    },
    "sources": {},
}


def _spec(tmp_path: Path, target: Path) -> DagSpec:
    return DagSpec.model_validate(
        {
            "dag_id": "shop",
            "dbt": {"project_dir": str(tmp_path / "project")},
            "tasks": {
                "orders": {
                    "task_id": "orders",
                    "command": "true",
                    "env": {"DBT_TARGET_PATH": str(target)},
                    "produces": [ORDERS],
                    "consumes": [STG],
                }
            },
        }
    )


SUBJECT = Subject("leoflow", "shop", "r1", "orders", 1, (STG,), (ORDERS,))


async def test_schema_sql_column_lineage_and_row_count_from_the_tasks_target(
    tmp_path: Path,
) -> None:
    target = tmp_path / "scratch" / "target"
    target.mkdir(parents=True)
    (target / "manifest.json").write_text(json.dumps(MANIFEST))
    results = {"results": [{"unique_id": "model.shop.orders", "compiled_code": "select 1",
                            "adapter_response": {"rows_affected": 42}}]}  # fmt: skip
    (target / "run_results.json").write_text(json.dumps(results))
    facts, sql = await DbtFacts().read(_spec(tmp_path, target), SUBJECT, complete=True)
    assert sql == "select 1"  # the try's compiled SQL, not the raw Jinja
    assert facts[ORDERS].row_count == 42
    assert facts[ORDERS].columns == (("id", "integer", "the order"), ("total", None, None))
    assert facts[ORDERS].column_lineage == {"total": ((STG, "amount"),)}
    assert facts[STG].columns == (("amount", "double", None),)
    event = run_event("COMPLETE", SUBJECT, 0.0, sql=sql, facts=facts)
    validate(event)
    assert event["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 42


async def test_before_its_first_run_the_project_manifest_speaks_and_no_row_count(
    tmp_path: Path,
) -> None:
    project_target = tmp_path / "project" / "target"
    project_target.mkdir(parents=True)
    (project_target / "manifest.json").write_text(json.dumps(MANIFEST))
    spec = _spec(tmp_path, tmp_path / "never-ran" / "target")
    facts, sql = await DbtFacts().read(spec, SUBJECT, complete=True)
    assert sql == "select * from {{ ref('stg_orders') }}"
    assert facts[ORDERS].row_count is None and facts[ORDERS].columns


async def test_unreadable_files_give_no_facets(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "manifest.json").write_text("{not json")
    assert await DbtFacts().read(_spec(tmp_path, target), SUBJECT, complete=True) == ({}, None)
