"""OpenLineage RunEvents as Leoflow writes them, checked against the spec's JSON schemas."""

from __future__ import annotations

import uuid

import pytest
from jsonschema import ValidationError

from leoflow.domain.lineage import (
    DatasetFacts,
    Subject,
    dataset_name,
    run_event,
    run_uuid,
    try_uuid,
)
from tests.support.openlineage import validate

TRY = Subject(
    "prod", "marts", "manual__1", "orders", 2,
    inputs=("duckdb://shop/main.stg_orders", "raw_events"),
    outputs=("duckdb://shop/main.orders",),
)  # fmt: skip


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("duckdb://shop/main.orders", ("duckdb://shop", "main.orders")),
        ("s3://bucket/prefix/part", ("s3://bucket", "prefix/part")),
        ("postgres://db.example:5432/app/public.t", ("postgres://db.example:5432", "app/public.t")),
        ("file:///data/x.csv", ("file", "/data/x.csv")),
        ("orders", ("prod", "orders")),
        ("bigquery://project/ds.t?x=1", ("bigquery://project", "ds.t?x=1")),
    ],
)
def test_asset_uris_become_openlineage_datasets(uri: str, expected: tuple[str, str]) -> None:
    assert dataset_name(uri, "prod") == expected


def test_run_ids_are_uuids_stable_per_run_and_per_try() -> None:
    assert run_uuid("d", "r") == run_uuid("d", "r") != run_uuid("d", "r2")
    assert try_uuid("d", "r", "t", 1) != try_uuid("d", "r", "t", 2)
    assert try_uuid("d", "r", "t", 1) != run_uuid("d", "r")
    # no ambiguity from joining: ("a.b", "c") and ("a", "b.c") are distinct runs
    assert run_uuid("a.b", "c") != run_uuid("a", "b.c")
    assert uuid.UUID(run_uuid("d", "r")).version == 5


@pytest.mark.parametrize("kind", ["START", "COMPLETE", "FAIL", "ABORT"])
def test_each_try_event_is_valid_with_its_parent(kind: str) -> None:
    event = run_event(kind, TRY, 1_765_000_000.25, message="exited with code 3")  # type: ignore[arg-type]
    validate(event)
    assert event["eventType"] == kind and event["eventTime"] == "2025-12-06T05:46:40.250Z"
    assert event["run"]["runId"] == try_uuid("marts", "manual__1", "orders", 2)
    assert event["job"] == {
        "namespace": "prod",
        "name": "marts.orders",
        "facets": event["job"]["facets"],
    }
    parent = event["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == run_uuid("marts", "manual__1")
    assert parent["job"] == {"namespace": "prod", "name": "marts"}
    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
        ("duckdb://shop", "main.stg_orders"), ("prod", "raw_events"),
    ]  # fmt: skip
    assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [
        ("duckdb://shop", "main.orders")
    ]
    assert ("errorMessage" in event["run"]["facets"]) == (kind == "FAIL")


def test_a_dag_run_event_has_no_parent() -> None:
    event = run_event("COMPLETE", Subject("prod", "marts", "manual__1"), 0.0)
    validate(event)
    assert event["run"]["facets"] == {} and event["job"]["name"] == "marts"
    assert event["job"]["facets"]["jobType"]["jobType"] == "DAG"


def test_dbt_facts_become_schema_sql_lineage_and_row_count_facets() -> None:
    facts = {
        "duckdb://shop/main.orders": DatasetFacts(
            columns=(("id", "integer", "the order"), ("total", None, None)),
            column_lineage={"total": (("duckdb://shop/main.stg_orders", "amount"),)},
            row_count=42,
        ),
        "duckdb://shop/main.stg_orders": DatasetFacts(columns=(("amount", "double", None),)),
    }
    event = run_event("COMPLETE", TRY, 0.0, sql="select 1", facts=facts)
    validate(event)
    out = event["outputs"][0]
    assert out["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "integer", "description": "the order"}, {"name": "total"},
    ]  # fmt: skip
    assert out["facets"]["columnLineage"]["fields"] == {
        "total": {"inputFields": [{"namespace": "duckdb://shop", "name": "main.stg_orders",
                                   "field": "amount"}]}
    }  # fmt: skip
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 42
    assert event["job"]["facets"]["sql"]["query"] == "select 1"
    stg = event["inputs"][0]
    assert stg["facets"]["schema"]["fields"] == [{"name": "amount", "type": "double"}]
    assert "outputFacets" not in stg and "columnLineage" not in stg["facets"]


def test_the_vendored_schema_refuses_a_broken_event() -> None:
    # The validator is no rubber stamp: a wrong facet or a non-UUID run id fails it.
    event = run_event("START", TRY, 0.0)
    event["run"]["facets"]["parent"]["run"]["runId"] = "not-a-uuid"
    with pytest.raises(ValidationError):
        validate(event)
    event = run_event("START", TRY, 0.0)
    del event["run"]["facets"]["parent"]["job"]
    with pytest.raises(ValidationError):
        validate(event)
