"""Mapped tasks' pure logic: the field, the load checks, the expansion plan and the
run's DAG once a mapped task has its items."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.dag import DagSpec
from leoflow.domain.mapping import (
    Expansion,
    FromConf,
    FromOutput,
    map_problems,
    plan_expansion,
    with_items,
)
from leoflow.domain.progress import topological_order
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TaskState
from leoflow.domain.task_instance import TaskInstance


def _dag(tasks: str) -> DagSpec:
    return parse_dag(f"dag_id: m\ntasks:\n{tasks}", Path("m.yaml"))


def _errors(tasks: str) -> list[str]:
    with pytest.raises(DagFileError) as caught:
        _dag(tasks)
    return [f"{p.field}: {p.message}" for p in caught.value.problems]


UP = "  up:\n    command: 'true'\n"


def test_the_three_sources_load() -> None:
    spec = _dag(
        UP + "  lit:\n    command: x\n    map_over: [a, 2, {k: v}]\n"
        "  cf:\n    command: x\n    map_over: {conf: files}\n"
        "  out:\n    command: x\n    depends_on: [up]\n    map_over: {output: up}\n"
    )
    assert spec.tasks["lit"].map_over == ["a", 2, {"k": "v"}]
    assert spec.tasks["cf"].map_over == FromConf(conf="files")
    assert spec.tasks["out"].map_over == FromOutput(output="up")
    assert spec.tasks["up"].map_over is None and spec.tasks["up"].max_map_items == 1024
    # What the store keeps reads back the same (the scheduler parses the stored JSON).
    again = DagSpec.model_validate_json(spec.model_dump_json())
    assert again == spec


def test_bad_map_over_is_a_load_error_with_its_field_path() -> None:
    assert _errors("  t:\n    command: x\n    map_over: abc\n") == [
        "tasks.t.map_over: expected a list of items, {conf: KEY} or {output: UPSTREAM_TASK}, "
        "got 'abc'"
    ]
    assert _errors(UP + "  t:\n    command: x\n    map_over: {output: up}\n") == [
        "tasks.t.map_over.output: 'up' is not a direct upstream of 't' "
        "(map over the output of a task listed in its depends_on)"
    ]
    assert _errors("  t:\n    command: x\n    map_over: [1, 2, 3]\n    max_map_items: 2\n") == [
        "tasks.t.map_over: 3 items, more than max_map_items (2)"
    ]
    assert _errors("  t:\n    command: x\n    map_over: {conf: a, output: b}\n")[0].startswith(
        "tasks.t.map_over: expected a list of items"
    )
    assert _errors("defaults:\n  map_over: [1]\n" + UP.replace("  up", "  t")) != []


def test_map_over_is_refused_on_a_dbt_task_and_on_a_mapped_upstream() -> None:
    spec = _dag(UP + "  t:\n    command: x\n    map_over: [1]\n")
    assert map_problems(spec, {"t"}) == [
        (("tasks", "t", "map_over"), "map_over is not supported on a dbt task")
    ]
    errors = _errors(
        "  m:\n    command: x\n    map_over: [1]\n"
        "  t:\n    command: x\n    depends_on: [m]\n    map_over: {output: m}\n"
    )
    assert errors == ["tasks.t.map_over.output: 'm' is itself mapped; not supported"]


def _plan(
    tasks: str,
    task: str,
    conf: dict[str, object] | None = None,
    **ups: tuple[TaskState, str | None],
) -> Expansion:
    spec = _dag(tasks)
    states = {k: v[0] for k, v in ups.items()}
    outputs = {k: v[1] for k, v in ups.items()}
    return plan_expansion(spec.tasks[task], conf or {}, states, outputs)


OUT = UP + "  t:\n    command: x\n    depends_on: [up]\n    map_over: {output: up}\n"


def test_the_plan_from_each_source() -> None:
    lit = _plan("  t:\n    command: x\n    map_over: [a, 2]\n", "t")
    assert lit.items == ('"a"', "2") and lit.end is None
    conf = _plan("  t:\n    command: x\n    map_over: {conf: f}\n", "t", {"f": [{"n": 1}]})
    assert conf.items == ('{"n":1}',)
    out = _plan(OUT, "t", up=(TaskState.SUCCESS, '["x", "y"]'))
    assert out.items == ('"x"', '"y"')


def test_the_plan_without_items() -> None:
    empty = _plan("  t:\n    command: x\n    map_over: {conf: f}\n", "t", {"f": []})
    assert (empty.end, empty.reason) == (TaskState.SKIPPED, EndReason.SKIPPED)
    missing = _plan("  t:\n    command: x\n    map_over: {conf: f}\n", "t", {})
    assert missing.end is TaskState.FAILED
    assert missing.message == "map_over: the run's conf has no key 'f'"
    scalar = _plan("  t:\n    command: x\n    map_over: {conf: f}\n", "t", {"f": "abc"})
    assert scalar.message == "map_over: conf key 'f' is a JSON string, not a list"
    too_many = _plan(
        "  t:\n    command: x\n    map_over: {conf: f}\n    max_map_items: 3\n", "t", {"f": [1] * 4}
    )
    assert (too_many.end, too_many.reason) == (TaskState.FAILED, EndReason.MAP_FAILED)
    assert too_many.message == ("map_over: conf key 'f' has 4 items, more than max_map_items (3)")
    obj = _plan(OUT, "t", up=(TaskState.SUCCESS, '{"a": 1}'))
    assert obj.message == "map_over: the output of 'up' is a JSON object, not a list"
    none = _plan(OUT, "t", up=(TaskState.SUCCESS, None))
    assert none.end is TaskState.FAILED
    assert _plan(OUT, "t", up=(TaskState.RUNNING, None)).wait
    assert _plan(OUT, "t", up=(TaskState.SKIPPED, None)).end is TaskState.SKIPPED
    failed = _plan(OUT, "t", up=(TaskState.FAILED, None))
    assert failed.end is TaskState.UPSTREAM_FAILED


def _ti(task_id: str, map_item: str | None = None) -> TaskInstance:
    base = TaskInstance(
        1, 1, "m", "r", task_id, TaskState.NONE, 0, 1, "default_pool", 1, 0,
        None, None, None, None, None, None, None, None, None, None, 0.0,
    )  # fmt: skip
    return replace(base, map_item=map_item)


def test_the_runs_dag_replaces_a_mapped_task_by_its_items() -> None:
    spec = _dag(
        UP + "  t:\n    command: x\n    depends_on: [up]\n    env: {A: b}\n    map_over: [p, q]\n"
        "  after:\n    command: x\n    depends_on: [up, t]\n    trigger_rule: all_done\n"
        "  t2:\n    command: x\n    depends_on: [t]\n    map_over: [1]\n"
    )
    tis = [_ti("up"), _ti("t[1]", '"q"'), _ti("t[0]", '"p"'), _ti("after"), _ti("t2")]
    run = with_items(spec, tis)
    assert set(run.tasks) == {"up", "t[0]", "t[1]", "after", "t2"}
    item = run.tasks["t[1]"]
    assert item.task_id == "t[1]" and item.map_over is None
    assert item.env == {"A": "b", "LEOFLOW_MAP_ITEM": '"q"', "LEOFLOW_MAP_INDEX": "1"}
    assert item.depends_on == ("up",)
    assert run.tasks["after"].depends_on == ("up", "t[0]", "t[1]")
    assert run.tasks["after"].trigger_rule == "all_done"
    assert run.tasks["t2"].depends_on == ("t[0]", "t[1]")
    assert topological_order(run)[0] == "up"
    # Without items (not expanded yet) the DAG is the same object; with them, idempotent.
    assert with_items(spec, [_ti("up"), _ti("t")]) is spec
    assert with_items(run, tis) is run
    assert json.loads(run.tasks["t[0]"].env["LEOFLOW_MAP_ITEM"]) == "p"
