"""dbt nodes -> task ids: never two nodes in one task, silently (leoflow.domain.dbt_ids)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from leoflow.dagfile.problems import DagFileError
from leoflow.domain.dag import TASK_ID_PATTERN
from leoflow.domain.dbt import DbtSpec
from tests.unit.domain.test_dbt import load, manifest, node, run


def versioned(name: str, version: int, package: str = "shop") -> tuple[str, dict[str, Any]]:
    uid, body = node("model", name, package=package)
    body["version"] = version
    body["fqn"] = [*body["fqn"], f"v{version}"]
    return f"{uid}.v{version}", body


def test_names_that_sanitize_to_one_id_are_a_load_error_naming_every_node() -> None:
    data = manifest(
        node("model", "order items"),
        node("model", "order_items"),
        node("model", "order$items"),
        node("model", "orders"),
    )
    result = run(DbtSpec(project_dir="shop"), data)
    assert result.tasks == {}
    assert len(result.problems) == 1
    loc, message = result.problems[0]
    assert loc == ("dbt", "project_dir")
    for uid in ("model.shop.order items", "model.shop.order_items", "model.shop.order$items"):
        assert uid in message
    assert "models/staging/order items.sql" in message
    assert "'dbt.shop.order_items'" in message
    assert "model.shop.orders" not in message


def test_ids_differing_only_in_case_are_one_task() -> None:
    result = run(
        DbtSpec(project_dir="shop"), manifest(node("model", "Orders"), node("model", "orders"))
    )
    assert result.tasks == {}
    ((loc, message),) = result.problems
    assert loc == ("dbt", "project_dir")
    assert "model.shop.Orders" in message and "model.shop.orders" in message
    assert "'dbt.shop.Orders' / 'dbt.shop.orders'" in message


def test_packages_keep_ids_apart_that_sanitize_alike() -> None:
    data = manifest(node("model", "a b", package="shop"), node("model", "A_b", package="crm"))
    result = run(DbtSpec(project_dir="shop"), data)
    assert result.problems == []
    assert set(result.tasks) == {"dbt.shop.a_b", "dbt.crm.A_b"}
    assert result.uids == {"dbt.shop.a_b": "model.shop.a b", "dbt.crm.A_b": "model.crm.A_b"}


def test_each_version_of_a_versioned_model_is_its_own_task() -> None:
    data = manifest(
        versioned("dim_customers", 1),
        versioned("dim_customers", 2),
        node("model", "report", ["model.shop.dim_customers.v2"]),
    )
    result = run(DbtSpec(project_dir="shop"), data)
    assert result.problems == []
    assert set(result.tasks) == {"dbt.dim_customers.v1", "dbt.dim_customers.v2", "dbt.report"}
    assert result.tasks["dbt.report"]["depends_on"] == ["dbt.dim_customers.v2"]
    argv = result.tasks["dbt.dim_customers.v2"]["command"]
    assert argv[7:9] == ["--select", "fqn:shop.staging.dim_customers.v2"]


def test_a_test_and_a_package_named_test_are_told_apart() -> None:
    data = manifest(
        node("model", "x", package="shop"),
        node("model", "x", package="test"),
        node("test", "x", ["model.shop.x"]),
        node("model", "test.y"),
        node("test", "y", ["model.shop.x"]),
    )
    result = run(DbtSpec(project_dir="shop"), data)
    assert result.problems == []
    assert result.uids == {
        "dbt.shop.x": "model.shop.x",
        "dbt.test.x": "model.test.x",
        "dbt.test.shop.x": "test.shop.x",
        "dbt.shop.test.y": "model.shop.test.y",
        "dbt.test.shop.y": "test.shop.y",
    }


@pytest.mark.parametrize("tests", ["after_all", "after_model"])
def test_a_model_named_tests_never_takes_the_tests_task(tests: str) -> None:
    data = manifest(
        node("model", "tests"),
        node("model", "Tests", package="crm"),
        node("test", "t", ["model.shop.tests"]),
    )
    result = run(DbtSpec(project_dir="shop", tests=tests), data)
    assert result.problems == []
    assert result.uids["dbt.shop.tests"] == "model.shop.tests"
    assert result.uids["dbt.crm.Tests"] == "model.crm.Tests"
    if tests == "after_all":
        assert result.tasks["dbt.tests"]["command"][6:9] == ["test", "--select", "t"]
        assert set(result.tasks["dbt.tests"]["depends_on"]) == {"dbt.shop.tests", "dbt.crm.Tests"}


def test_a_seed_and_a_model_of_one_name_in_one_package_are_refused() -> None:
    data = manifest(
        node("seed", "customers"), node("model", "customers"), node("snapshot", "customers")
    )
    result = run(DbtSpec(project_dir="shop"), data)
    ((loc, message),) = result.problems
    assert loc == ("dbt", "project_dir")
    for uid in ("seed.shop.customers", "model.shop.customers", "snapshot.shop.customers"):
        assert uid in message


def test_long_names_are_shortened_to_valid_distinct_ids() -> None:
    stem = "m" * 230
    data = manifest(node("model", stem + "_a"), node("model", stem + "_b"))
    result = run(DbtSpec(project_dir="shop"), data)
    assert result.problems == []
    ids = sorted(result.tasks)
    assert len(ids) == 2 and ids[0] != ids[1]
    assert all(re.match(TASK_ID_PATTERN, task_id) for task_id in ids)


def test_ids_do_not_depend_on_the_manifest_s_order() -> None:
    nodes = [node("model", "a b"), node("model", "a-b"), node("model", "a_b", package="crm")]
    first = run(DbtSpec(project_dir="shop"), manifest(*nodes))
    second = run(DbtSpec(project_dir="shop"), manifest(*reversed(nodes)))
    assert first.uids == second.uids
    assert set(first.tasks) == {"dbt.a-b", "dbt.shop.a_b", "dbt.crm.a_b"}


def test_a_clash_is_a_load_error_of_the_dag_file() -> None:
    data = manifest(node("model", "a b"), node("model", "a.b"), node("model", "a_b"))
    with pytest.raises(DagFileError) as caught:
        load(
            """
            dag_id: shop
            dbt: {project_dir: shop}
            """,
            data,
        )
    text = str(caught.value)
    assert "dbt.project_dir" in text
    assert "model.shop.a b" in text and "model.shop.a_b" in text
