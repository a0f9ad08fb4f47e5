"""The resolved-section record: what a resolved document carries, and its one check."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from leoflow.domain.dag import TaskSpec
from leoflow.domain.dbt_resolved import (
    DbtResolution,
    manifest_sha256,
    resolution_problems,
    resolved_document,
    task_mapping,
)

RECORD = DbtResolution(
    manifest_sha256="a" * 64, project="shop", project_dir="/opt/shop", tasks=("dbt.a", "dbt.b")
)


def test_a_task_keeps_every_field_the_dag_defaults_set_even_at_its_model_default() -> None:
    task = TaskSpec(task_id="dbt.a", command=["dbt"], retries=0, pool="warehouse")
    # retries 0 is the model's default: without it the DAG's `defaults: {retries: 3}`
    # would come back when the API loads the document.
    assert task_mapping(task, ["retries", "env"]) == {
        "command": ["dbt"],
        "pool": "warehouse",
        "retries": 0,
        "env": {},
    }
    assert task_mapping(task, []) == {"command": ["dbt"], "pool": "warehouse"}


def test_the_document_is_the_one_written_plus_the_tasks_and_the_record() -> None:
    raw = {
        "dag_id": "d",
        "defaults": {"retries": 3},
        "tasks": {"x": {"command": "echo"}},
        "dbt": {"project_dir": "shop"},
    }
    out = resolved_document(raw, {"dbt.a": {"command": ["dbt"]}}, RECORD)
    assert out["defaults"] == {"retries": 3}
    assert out["tasks"] == {"x": {"command": "echo"}, "dbt.a": {"command": ["dbt"]}}
    assert out["dbt"]["project_dir"] == "shop"
    assert out["dbt"]["resolved"]["tasks"] == ["dbt.a", "dbt.b"]
    assert raw["tasks"] == {"x": {"command": "echo"}}  # the input is left as it was


def test_a_record_naming_a_task_the_document_lacks_is_a_problem_at_its_field() -> None:
    assert resolution_problems(RECORD, {"dbt.a", "dbt.b", "x"}) == []
    [(loc, message)] = resolution_problems(RECORD, {"dbt.a"})
    assert loc == ("dbt", "resolved", "tasks")
    assert "(dbt.b)" in message and "leoflow dags apply" in message


def test_the_manifest_hash_is_its_content_not_its_key_order() -> None:
    assert manifest_sha256({"a": 1, "b": [1, 2]}) == manifest_sha256({"b": [1, 2], "a": 1})
    assert manifest_sha256({"a": 1}) != manifest_sha256({"a": 2})


def test_a_record_needs_a_sha256_and_at_least_one_task() -> None:
    with pytest.raises(ValidationError, match="manifest_sha256"):
        DbtResolution(manifest_sha256="nope", project_dir="/p", tasks=("dbt.a",))
    with pytest.raises(ValidationError, match="tasks"):
        DbtResolution(manifest_sha256="a" * 64, project_dir="/p", tasks=())
