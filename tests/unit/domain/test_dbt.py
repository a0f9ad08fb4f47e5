"""The dbt manifest -> task graph translation and the selector subset, on hand-built manifests."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.dbt import DbtSpec, Expansion, Paths, expand
from leoflow.domain.dbt_section import DbtRequest

PATHS = Paths(project_dir="/p/shop", profiles_dir="/p/profiles")


def node(
    kind: str,
    name: str,
    deps: list[str] = (),  # type: ignore[assignment]
    *,
    package: str = "shop",
    folder: str = "staging",
    tags: list[str] = (),  # type: ignore[assignment]
    materialized: str = "view",
) -> tuple[str, dict[str, Any]]:
    uid = f"{kind}.{package}.{name}"
    suffix = {"seed": ".csv"}.get(kind, ".sql")
    body: dict[str, Any] = {
        "resource_type": kind,
        "name": name,
        "package_name": package,
        "fqn": [package, folder, name],
        "tags": list(tags),
        "original_file_path": f"{kind}s/{folder}/{name}{suffix}",
        "depends_on": {"nodes": list(deps)},
        "config": {"materialized": materialized},
    }
    return uid, body


def manifest(*nodes: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    sources = {
        "source.shop.shop.orders": {
            "resource_type": "source",
            "name": "orders",
            "source_name": "shop",
            "package_name": "shop",
            "fqn": ["shop", "staging", "shop", "orders"],
            "original_file_path": "models/staging/sources.yml",
        }
    }
    return {"metadata": {"project_name": "shop"}, "nodes": dict(nodes), "sources": sources}


SHOP = manifest(
    node("seed", "raw_customers", folder="raw"),
    node("model", "stg_customers", ["seed.shop.raw_customers"], tags=["staging"]),
    node("model", "stg_orders", ["source.shop.shop.orders"], tags=["staging"]),
    node(
        "model",
        "int_amounts",
        ["model.shop.stg_orders"],
        folder="marts",
        materialized="ephemeral",
    ),
    node(
        "model",
        "revenue",
        ["model.shop.stg_customers", "model.shop.int_amounts"],
        folder="marts",
        tags=["nightly"],
        materialized="table",
    ),
    node("snapshot", "customers_snapshot", ["seed.shop.raw_customers"], folder="snap"),
    node("test", "not_null_stg_customers_id", ["model.shop.stg_customers"]),
    node(
        "test",
        "relationships_orders_customers",
        ["model.shop.stg_orders", "model.shop.stg_customers"],
    ),
)


def run(spec: DbtSpec, data: dict[str, Any] = SHOP, ordinary: set[str] = frozenset()) -> Expansion:  # type: ignore[assignment]
    return expand(spec, data, dag_id="shop", paths=PATHS, ordinary_tasks=ordinary)


def deps(result: Expansion) -> dict[str, list[str]]:
    return {task: body["depends_on"] for task, body in result.tasks.items()}


def test_every_model_seed_and_snapshot_is_a_task_with_dbt_s_dependencies() -> None:
    result = run(DbtSpec(project_dir="shop"))
    assert result.problems == []
    assert deps(result) == {
        "dbt.raw_customers": [],
        "dbt.stg_customers": ["dbt.raw_customers"],
        "dbt.stg_orders": [],
        # through the ephemeral int_amounts to stg_orders; gated by stg_customers' test
        "dbt.revenue": [
            "dbt.stg_customers",
            "dbt.stg_orders",
            "dbt.test.not_null_stg_customers_id",
        ],
        "dbt.customers_snapshot": ["dbt.raw_customers"],
        "dbt.test.not_null_stg_customers_id": ["dbt.stg_customers"],
        "dbt.test.relationships_orders_customers": ["dbt.stg_customers", "dbt.stg_orders"],
    }
    assert "dbt.int_amounts" not in result.tasks  # dbt inlines ephemeral models


def test_each_task_runs_its_own_node_with_dbt_s_own_verb_and_scratch_paths_under_tmp() -> None:
    result = run(DbtSpec(project_dir="shop", target="prod", executable="/opt/dbt/bin/dbt"))
    seed = result.tasks["dbt.raw_customers"]
    assert seed["command"] == [
        "leoflow", "dbt-task", "--task", "dbt.raw_customers", "--",
        "/opt/dbt/bin/dbt", "seed", "--select", "fqn:shop.raw.raw_customers",
        "--project-dir", "/p/shop", "--profiles-dir", "/p/profiles", "--target", "prod",
    ]  # fmt: skip
    assert result.tasks["dbt.stg_orders"]["command"][6] == "run"
    assert result.tasks["dbt.customers_snapshot"]["command"][6] == "snapshot"
    test = result.tasks["dbt.test.not_null_stg_customers_id"]["command"]
    assert test[6:9] == ["test", "--select", "not_null_stg_customers_id"]
    env = seed["env"]
    assert env["DBT_TARGET_PATH"] == "/tmp/leoflow-dbt/shop/dbt.raw_customers/target"
    assert env["DBT_LOG_PATH"] == "/tmp/leoflow-dbt/shop/dbt.raw_customers/logs"
    assert env["DBT_PROFILES_DIR"] == "/p/profiles"


def test_tests_after_all_is_one_task_after_every_model_and_none_drops_them() -> None:
    after_all = run(DbtSpec(project_dir="shop", tests="after_all"))
    assert not any(t.startswith("dbt.test.") for t in after_all.tasks)
    tests = after_all.tasks["dbt.tests"]
    assert tests["depends_on"] == sorted(t for t in after_all.tasks if t != "dbt.tests")
    assert tests["command"][6:10] == [
        "test",
        "--select",
        "not_null_stg_customers_id",
        "relationships_orders_customers",
    ]
    assert deps(after_all)["dbt.revenue"] == ["dbt.stg_customers", "dbt.stg_orders"]
    none = run(DbtSpec(project_dir="shop", tests="none"))
    assert not any("test" in t for t in none.tasks)


# ruff: noqa: E501  (a table of selectors reads best one per line)
@pytest.mark.parametrize(
    ("select", "exclude", "expected"),
    [
        (["tag:nightly"], [], {"dbt.revenue"}),
        (["+revenue"], [], {"dbt.revenue", "dbt.stg_customers", "dbt.stg_orders", "dbt.raw_customers"}),
        (["1+revenue"], [], {"dbt.revenue", "dbt.stg_customers"}),
        (["raw_customers+1"], [], {"dbt.raw_customers", "dbt.stg_customers", "dbt.customers_snapshot"}),
        (["source:shop.orders+"], [], {"dbt.stg_orders", "dbt.revenue"}),
        (["path:models/marts"], [], {"dbt.revenue"}),
        (["shop.staging.*"], [], {"dbt.stg_customers", "dbt.stg_orders"}),
        (["stg_*"], ["stg_orders"], {"dbt.stg_customers"}),
        (["resource_type:seed resource_type:snapshot"], [], {"dbt.raw_customers", "dbt.customers_snapshot"}),
        (["tag:staging,stg_orders"], [], {"dbt.stg_orders"}),
        (["@stg_customers"], ["resource_type:snapshot"], {"dbt.raw_customers", "dbt.stg_customers", "dbt.revenue", "dbt.stg_orders"}),
        (["package:shop"], ["tag:staging", "resource_type:seed", "resource_type:snapshot"], {"dbt.revenue"}),
    ],
)  # fmt: skip
def test_selection_subset(select: list[str], exclude: list[str], expected: set[str]) -> None:
    result = run(DbtSpec(project_dir="shop", select=select, exclude=exclude, tests="none"))
    assert result.problems == []
    assert set(result.tasks) == expected


def test_tests_come_with_their_models_only_when_all_parents_are_selected() -> None:
    result = run(DbtSpec(project_dir="shop", select=["stg_customers"]))
    assert set(result.tasks) == {"dbt.stg_customers", "dbt.test.not_null_stg_customers_id"}
    assert result.tasks["dbt.stg_customers"]["depends_on"] == []  # raw_customers not selected


def test_unsupported_selector_and_empty_selection_are_errors_at_their_field() -> None:
    bad = run(DbtSpec(project_dir="shop", select=["state:modified+"]))
    assert bad.problems[0][0] == ("dbt", "select")
    assert "'state' (in 'state:modified+') is not supported" in bad.problems[0][1]
    bad = run(DbtSpec(project_dir="shop", exclude=["config.materialized:table"]))
    assert bad.problems[0][0] == ("dbt", "exclude")
    empty = run(DbtSpec(project_dir="shop", select=["tag:nope"]))
    assert empty.problems == [
        (
            ("dbt", "select"),
            "selects no model, seed or snapshot in dbt project 'shop' (select: 'tag:nope')",
        )
    ]


def test_sources_wait_for_ordinary_tasks_and_unknown_sources_are_errors() -> None:
    spec = DbtSpec(project_dir="shop", depends_on={"source:shop.orders": ["extract"]})
    result = run(spec, ordinary={"extract"})
    assert deps(result)["dbt.stg_orders"] == ["extract"]
    # revenue reads stg_orders, not the source itself: it waits through stg_orders
    assert "extract" not in deps(result)["dbt.revenue"]
    unknown = run(DbtSpec(project_dir="shop", depends_on={"source:shop.refunds": ["extract"]}))
    assert unknown.problems == [
        (
            ("dbt", "depends_on", "source:shop.refunds"),
            "no such source in the dbt project (sources: source:shop.orders)",
        )
    ]
    no_task = run(spec, ordinary=set())
    assert no_task.problems[0][0] == ("dbt", "depends_on", "source:shop.orders", "0")


def test_two_packages_with_one_model_name_get_package_qualified_task_ids() -> None:
    data = manifest(
        node("model", "customers", package="shop"),
        node("model", "customers", package="crm"),
        node("model", "orders", package="crm"),
    )
    result = run(DbtSpec(project_dir="shop"), data)
    assert set(result.tasks) == {"dbt.shop.customers", "dbt.crm.customers", "dbt.orders"}
    assert result.tasks["dbt.crm.customers"]["command"][8] == "fqn:crm.staging.customers"


# ------------------------------------------------------------------ through the loader


def expander(data: dict[str, Any]) -> Any:
    def run_it(request: DbtRequest) -> Expansion:
        return expand(
            request.spec,
            data,
            dag_id=request.dag_id,
            paths=PATHS,
            ordinary_tasks=request.ordinary_tasks,
        )

    return run_it


def load(text: str, data: dict[str, Any] = SHOP) -> Any:
    return parse_dag(dedent(text).lstrip(), Path("dag.yaml"), LoadOptions(dbt=expander(data)))


def errors(text: str, data: dict[str, Any] = SHOP) -> str:
    with pytest.raises(DagFileError) as caught:
        load(text, data)
    return str(caught.value)


def test_a_hybrid_dag_loads_with_defaults_applied_to_the_dbt_tasks() -> None:
    spec = load(
        """
        dag_id: analytics
        defaults: {retries: 3, env: {A: dag}}
        tasks:
          extract: {command: "echo extract"}
          report: {command: "echo report", depends_on: [dbt.revenue]}
        dbt:
          project_dir: shop
          tests: none
          depends_on: {"source:shop.orders": [extract]}
          defaults: {pool: warehouse, secrets: [warehouse_password], env: {B: dbt}}
        """
    )
    revenue = spec.tasks["dbt.revenue"]
    assert (revenue.pool, revenue.retries, revenue.secrets) == (
        "warehouse",
        3,
        ("warehouse_password",),
    )
    assert revenue.env["A"] == "dag" and revenue.env["B"] == "dbt"
    assert revenue.env["DBT_TARGET_PATH"].startswith("/tmp/")
    assert spec.tasks["dbt.stg_orders"].depends_on == ("extract",)
    assert spec.tasks["report"].depends_on == ("dbt.revenue",)
    assert spec.dbt is not None and spec.dbt.project_dir == "shop"


def test_a_cycle_between_an_ordinary_task_and_a_dbt_model_is_a_load_error() -> None:
    text = errors(
        """
        dag_id: analytics
        tasks:
          extract: {command: "echo", depends_on: [dbt.revenue]}
        dbt:
          project_dir: shop
          depends_on: {"source:shop.orders": [extract]}
        """
    )
    assert "dependency cycle: " in text
    cycle = text.split("dependency cycle: ", 1)[1].split(" (", 1)[0].split(" -> ")
    assert {"extract", "dbt.stg_orders", "dbt.revenue"} <= set(cycle), text


def test_bad_dbt_fields_name_their_path() -> None:
    text = errors(
        """
        dag_id: analytics
        dbt:
          project_dir: shop
          tests: sometimes
          depends_on: {"shop.orders": [x]}
        """
    )
    assert "dag.yaml:4: dbt.tests: input should be 'after_model', 'after_all' or 'none'" in text
    assert "dbt.depends_on: key 'shop.orders' must name a dbt source" in text
    text = errors("dag_id: a\ndbt: {project_dir: shop, defaults: {retries: -1}}\n")
    assert "dbt.defaults.retries: input should be greater than or equal to 0" in text
    text = errors("dag_id: a\ndbt: {project_dir: shop, select: [nothing_here]}\n")
    assert "dag.yaml:2: dbt.select: selects no model" in text


def test_a_dbt_section_without_an_expander_is_refused() -> None:
    with pytest.raises(DagFileError) as caught:
        parse_dag("dag_id: a\ndbt: {project_dir: shop}\n", Path("api:a.yaml"))
    assert "dbt: a dbt section needs its project on disk" in str(caught.value)


def test_a_task_id_that_clashes_with_a_dbt_node_is_an_error() -> None:
    text = errors(
        """
        dag_id: analytics
        tasks:
          dbt.revenue: {command: "echo"}
        dbt: {project_dir: shop}
        """
    )
    assert "tasks.dbt.revenue: task id 'dbt.revenue' is also the task of dbt node" in text


def test_batch_wave_plans_the_nodes_of_one_depth_together_with_what_each_waits_for() -> None:
    from leoflow.dbt import wave
    from leoflow.domain import dbt_waves

    result = run(DbtSpec(project_dir="shop", batch="wave"), ordinary={"extract"})
    assert run(DbtSpec(project_dir="shop")).waves is None
    assert result.waves is not None
    waves = {level: sorted(members) for level, members in result.waves["waves"].items()}
    assert waves == {
        "0": ["dbt.raw_customers", "dbt.stg_orders"],
        "1": ["dbt.customers_snapshot", "dbt.stg_customers"],
        "2": ["dbt.test.not_null_stg_customers_id", "dbt.test.relationships_orders_customers"],
    }  # dbt.revenue is alone at depth 3: no wave
    member = result.waves["waves"]["2"]["dbt.test.relationships_orders_customers"]
    assert member["dbt_deps"] == ["dbt.stg_customers", "dbt.stg_orders"]
    assert member["uid"] == "test.shop.relationships_orders_customers"
    assert member["select"] == ["relationships_orders_customers"]
    # The wrapper (stdlib only) reads the same env names the planner writes.
    assert (wave.ENV_PLAN, wave.ENV_WAVE, wave.ENV_RUNS) == (
        dbt_waves.ENV_PLAN,
        dbt_waves.ENV_WAVE,
        dbt_waves.ENV_RUNS,
    )


def test_batch_wave_refuses_a_trigger_rule_its_leader_cannot_rely_on() -> None:
    text = dedent(
        """
        dag_id: shop
        dbt:
          project_dir: shop
          batch: wave
          defaults: {trigger_rule: all_done}
        """
    )
    with pytest.raises(DagFileError) as caught:
        parse_dag(text, Path("shop.yaml"), LoadOptions(dbt=lambda r: run(r.spec)))
    assert "dbt.batch: batch: wave needs the dbt tasks' trigger_rule all_success" in str(
        caught.value
    )
