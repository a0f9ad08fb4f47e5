"""A dbt DAG declares its assets from the manifest: each model, seed and snapshot produces
its relation; what it reads (sources, and the relations below it) it consumes."""

from __future__ import annotations

from typing import Any

from leoflow.domain.dbt import DbtSpec, expand
from leoflow.domain.dbt_assets import relation_uri
from tests.unit.domain.test_dbt import PATHS, SHOP


def located(manifest: dict[str, Any], adapter: str | None = "duckdb") -> dict[str, Any]:
    """``manifest`` with where dbt builds each node, as a real manifest says."""
    out = {**manifest, "metadata": {**manifest["metadata"]}}
    if adapter is not None:
        out["metadata"]["adapter_type"] = adapter
    out["nodes"] = {
        uid: {**node, "database": "Warehouse", "schema": "main", "alias": node["name"]}
        for uid, node in manifest["nodes"].items()
    }
    out["sources"] = {
        uid: {**node, "database": "warehouse", "schema": "raw", "identifier": "raw_orders"}
        for uid, node in manifest["sources"].items()
    }
    return out


def test_each_runnable_node_produces_its_relation_and_consumes_what_it_reads() -> None:
    result = expand(DbtSpec(project_dir="shop"), located(SHOP), dag_id="shop", paths=PATHS)
    assert result.problems == []
    assets = {t: (b.get("produces"), b.get("consumes")) for t, b in result.tasks.items()}
    assert assets == {
        "dbt.raw_customers": (["duckdb://warehouse/main.raw_customers"], None),
        "dbt.stg_customers": (
            ["duckdb://warehouse/main.stg_customers"],
            ["duckdb://warehouse/main.raw_customers"],
        ),
        # a source is consumed under its identifier
        "dbt.stg_orders": (
            ["duckdb://warehouse/main.stg_orders"],
            ["duckdb://warehouse/raw.raw_orders"],
        ),
        # through the ephemeral int_amounts, which is no relation, to stg_orders
        "dbt.revenue": (
            ["duckdb://warehouse/main.revenue"],
            ["duckdb://warehouse/main.stg_customers", "duckdb://warehouse/main.stg_orders"],
        ),
        "dbt.customers_snapshot": (
            ["duckdb://warehouse/main.customers_snapshot"],
            ["duckdb://warehouse/main.raw_customers"],
        ),
        # tests build nothing
        "dbt.test.not_null_stg_customers_id": (None, None),
        "dbt.test.relationships_orders_customers": (None, None),
    }


def test_the_alias_names_the_relation_and_a_missing_adapter_reads_dbt() -> None:
    model = {"resource_type": "model", "name": "orders", "alias": "Orders V2", "schema": "s"}
    assert relation_uri({**model, "database": "db"}, "postgres") == "postgres://db/s.Orders%20V2"
    assert relation_uri(model, "bigquery") == "bigquery:///s.Orders%20V2"  # no database
    bare = expand(DbtSpec(project_dir="shop"), SHOP, dag_id="shop", paths=PATHS)
    assert bare.tasks["dbt.stg_orders"]["produces"] == ["dbt:///stg_orders"]
