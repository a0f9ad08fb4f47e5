"""A run's dbt selection in conf, on the graph a DAG keeps (hand-built manifest)."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.domain.backfill import run_env
from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_run_select import RunSelectionError, partial_run_env, run_tasks
from tests.unit.domain.test_dbt import run


def _spec(batch: str = "none") -> DagSpec:
    text = dedent(
        f"""
        dag_id: shop
        tasks:
          extract: {{command: echo}}
        dbt:
          project_dir: shop
          batch: {batch}
          depends_on: {{"source:shop.orders": [extract]}}
        """
    )
    return parse_dag(
        text, Path("shop.yaml"), LoadOptions(dbt=lambda r: run(r.spec, ordinary={"extract"}))
    )


def test_the_dag_keeps_its_graph_and_a_selection_picks_dbt_tasks_and_keeps_the_others() -> None:
    spec = _spec()
    assert spec.dbt is not None and spec.dbt.graph is not None
    assert run_tasks(spec, None) is None and run_tasks(spec, {"day": 1}) is None
    assert run_tasks(spec, {"dbt_select": "tag:nightly"}) == frozenset({"extract", "dbt.revenue"})
    # A model's own tests come with it; a test of two models only with both.
    assert run_tasks(spec, {"dbt_select": ["stg_customers"]}) == frozenset(
        {"extract", "dbt.stg_customers", "dbt.test.not_null_stg_customers_id"}
    )
    picked = run_tasks(spec, {"dbt_select": "source:shop.orders+", "dbt_exclude": "tag:nightly"})
    assert picked == frozenset(
        # The relationships test is a child of stg_orders, as in dbt.
        {"extract", "dbt.stg_orders", "dbt.test.relationships_orders_customers"}
    )


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"dbt_select": "config.materialized:view"}, "conf.dbt_select: selector method 'config."),
        ({"dbt_exclude": "+"}, "conf.dbt_exclude: cannot read '+'"),
        ({"dbt_select": "nothing_here"}, "conf.dbt_select: selects no dbt task of DAG 'shop'"),
        ({"dbt_select": {"a": 1}}, "conf.dbt_select: expected a dbt selector string"),
    ],
)
def test_a_selection_that_cannot_make_a_run_says_which_conf_key(
    conf: dict[str, object], message: str
) -> None:
    with pytest.raises(RunSelectionError) as caught:
        run_tasks(_spec(), conf)
    assert str(caught.value).startswith(message), caught.value


def test_a_dag_without_a_dbt_section_refuses_a_dbt_selection() -> None:
    spec = parse_dag("dag_id: plain\ntasks:\n  a: {command: echo}\n", Path("plain.yaml"))
    with pytest.raises(RunSelectionError, match="has no dbt graph"):
        run_tasks(spec, {"dbt_select": "a"})


def test_a_partial_run_of_a_wave_dag_batches_no_wave() -> None:
    spec = _spec("wave")
    assert partial_run_env(spec) == {} and run_env(spec, None) == {}
    keep = run_tasks(spec, {"dbt_select": "tag:staging"})
    assert keep is not None
    part = spec.model_copy(update={"tasks": {t: s for t, s in spec.tasks.items() if t in keep}})
    assert run_env(part, None) == {"LEOFLOW_DBT_WAVE": ""}
    assert partial_run_env(_spec().model_copy(update={"tasks": part.tasks})) == {}  # not wave


@pytest.mark.parametrize(
    ("graph", "problem"),
    [
        ("nodes", "Input should be a valid dictionary"),
        ({"nodes": [], "tasks": {}}, "nodes: expected a mapping"),
        ({"nodes": {"model.p.a": ["model", "a"]}, "tasks": {}}, "nodes.model.p.a: expected"),
        ({"nodes": {"model.p.a": ["model", "a", "p", "fqn", [], "", None, []]}, "tasks": {}},
         "nodes.model.p.a: expected"),
        ({"nodes": {}, "tasks": {"dbt.a": 1}}, "tasks: expected a mapping"),
        ({"project": 7, "nodes": {}, "tasks": {}}, "project: expected a string"),
    ],
)  # fmt: skip
def test_a_malformed_graph_a_document_carries_is_a_load_error_at_dbt_graph(
    graph: object, problem: str
) -> None:
    # ``leoflow dags apply`` sends the graph; anything else that POSTs one must not make
    # every later conf selection on the DAG fail with a crash instead of an answer.
    good = _spec().model_dump(mode="json")
    with pytest.raises(ValueError, match=r"dbt\.graph") as raised:
        DagSpec.model_validate({**good, "dbt": {**good["dbt"], "graph": graph}})
    assert problem in str(raised.value)
    assert DagSpec.model_validate(good).dbt.graph == good["dbt"]["graph"]  # type: ignore[union-attr]
