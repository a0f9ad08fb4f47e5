"""Mapped tasks (``map_over:``): one task instance per item of a list.

The list is given in the DAG (``map_over: [a, b, c]``), read from the run's conf
(``map_over: {conf: key}``) or from a direct upstream's output (``map_over: {output:
task}``, a JSON list). When the mapped task's upstreams are done, the scheduler makes
its items: task instances ``task[0]``, ``task[1]`` ... that replace it in the run, each
with ``LEOFLOW_MAP_ITEM`` (the item as JSON) and ``LEOFLOW_MAP_INDEX``; every task that
depended on the mapped task depends on all its items (so trigger rules count them all).
An empty list skips the mapped task, as in Airflow.

Pure: the field's shape, the load checks, what an expansion comes to, and the run's
DAG with the items in it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from leoflow.domain.outputs import item_of
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TaskState

if TYPE_CHECKING:
    from leoflow.domain.dag import DagSpec, TaskSpec
    from leoflow.domain.task_instance import TaskInstance

DEFAULT_MAX_MAP_ITEMS = 1024
# The most items a mapped task may have: one scheduler makes, stores and holds them
# all (a run of them is rows, mirrors and a spec of that many tasks).
MAX_MAP_ITEMS = 10_000
ITEM_ENV = "LEOFLOW_MAP_ITEM"
INDEX_ENV = "LEOFLOW_MAP_INDEX"


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class FromConf(_Source):
    conf: Annotated[str, Field(min_length=1)]


class FromOutput(_Source):
    output: Annotated[str, Field(min_length=1)]


def _map_over(value: object) -> object:
    # One check, one message at ``map_over`` (not one per member of the union).
    if isinstance(value, list | tuple):
        try:
            json.dumps(list(value), allow_nan=False)  # NaN and inf are not JSON
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"every item must be a JSON value (string, number...): {exc}"
            ) from None
        return list(value)
    if isinstance(value, dict) and len(value) == 1 and set(value) <= {"conf", "output"}:
        ((key, name),) = value.items()
        if isinstance(name, str) and name:
            return FromConf(conf=name) if key == "conf" else FromOutput(output=name)
    text = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise ValueError(
        f"expected a list of items, {{conf: KEY}} or {{output: UPSTREAM_TASK}}, got {text}"
    )


MapOver = Annotated[list[Any] | FromConf | FromOutput, BeforeValidator(_map_over)]


def item_task_id(task_id: str, index: int) -> str:
    return f"{task_id}[{index}]"


def map_problems(spec: DagSpec, dbt_tasks: Collection[str]) -> list[tuple[tuple[str, ...], str]]:
    """The load errors of the DAG's mapped tasks, each with its field path."""
    problems: list[tuple[tuple[str, ...], str]] = []
    for task_id, task in spec.tasks.items():
        source, where = task.map_over, ("tasks", task_id, "map_over")
        if source is None:
            continue
        if task_id in dbt_tasks:
            problems.append((where, "map_over is not supported on a dbt task"))
        elif isinstance(source, list) and len(source) > task.max_map_items:
            problems.append(
                (where, f"{len(source)} items, more than max_map_items ({task.max_map_items})")
            )
        elif isinstance(source, FromOutput):
            upstream = source.output
            if upstream not in task.depends_on:
                problems.append(
                    (
                        (*where, "output"),
                        f"{upstream!r} is not a direct upstream of {task_id!r} "
                        "(map over the output of a task listed in its depends_on)",
                    )
                )
            elif spec.tasks.get(upstream) is not None and spec.tasks[upstream].map_over:
                problems.append(
                    ((*where, "output"), f"{upstream!r} is itself mapped; not supported")
                )
    return problems


@dataclass(frozen=True, slots=True)
class Expansion:
    """What a mapped task comes to: its items (JSON texts), or an end with no item,
    or nothing yet (``wait``: the upstream whose output it maps over is not done)."""

    items: tuple[str, ...] = ()
    end: TaskState | None = None
    reason: str = ""
    message: str = ""
    wait: bool = False


def plan_expansion(
    task: TaskSpec,
    conf: Mapping[str, Any],
    states: Mapping[str, TaskState],
    outputs: Mapping[str, str | None],
) -> Expansion:
    """The items of ``task`` in a run with this conf and these upstream states/outputs."""
    source = task.map_over
    if isinstance(source, FromConf):
        if source.conf not in conf:
            return _failed(f"map_over: the run's conf has no key {source.conf!r}")
        values, what = conf[source.conf], f"conf key {source.conf!r}"
    elif isinstance(source, FromOutput):
        name, state = source.output, states.get(source.output)
        if state is TaskState.SKIPPED:
            return _ended(TaskState.SKIPPED, f"map_over: {name!r} was skipped")
        if state in (TaskState.FAILED, TaskState.UPSTREAM_FAILED):
            return _ended(TaskState.UPSTREAM_FAILED, f"map_over: {name!r} is {state}: no list")
        if state is not TaskState.SUCCESS:
            return Expansion(wait=True)
        text = outputs.get(name)
        if text is None:
            return _failed(f"map_over: {name!r} wrote no output (a JSON list to $LEOFLOW_OUTPUT)")
        values, what = json.loads(text), f"the output of {name!r}"
    else:
        values, what = list(source or ()), "the list"
    if not isinstance(values, list):
        return _failed(f"map_over: {what} is a JSON {_kind(values)}, not a list")
    if not values:
        return _ended(TaskState.SKIPPED, f"map_over: {what} is empty, so no item runs")
    if len(values) > task.max_map_items:
        return _failed(
            f"map_over: {what} has {len(values)} items, more than max_map_items "
            f"({task.max_map_items})"
        )
    return Expansion(items=tuple(json.dumps(v, separators=(",", ":")) for v in values))


def _failed(message: str) -> Expansion:
    return _ended(TaskState.FAILED, message)


_END_REASONS = {
    TaskState.FAILED: EndReason.MAP_FAILED,
    TaskState.SKIPPED: EndReason.SKIPPED,
    TaskState.UPSTREAM_FAILED: EndReason.UPSTREAM_FAILED,
}


def _ended(state: TaskState, message: str) -> Expansion:
    return Expansion(end=state, reason=_END_REASONS[state], message=message)


def _kind(value: object) -> str:
    names = {dict: "object", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def with_items(spec: DagSpec, tis: Sequence[TaskInstance]) -> DagSpec:
    """The run's DAG: each mapped task the run has items of replaced by them, and
    every task that depended on it depending on all of them."""
    items: dict[str, list[tuple[int, str]]] = {}
    for ti in tis:
        if ti.map_item is None:  # most task instances: one look, no parsing
            continue
        found = item_of(ti.task_id)
        if found is not None and found[0] in spec.tasks:
            items.setdefault(found[0], []).append((found[1], ti.map_item))
    if not items:
        return spec
    tasks: dict[str, TaskSpec] = {}
    ids = {base: [item_task_id(base, i) for i, _ in sorted(found)] for base, found in items.items()}
    for task_id, task in spec.tasks.items():
        if any(upstream in ids for upstream in task.depends_on):
            deps = [d for u in task.depends_on for d in ids.get(u, [u])]
            task = task.model_copy(update={"depends_on": tuple(deps)})
        if task_id in items:
            for index, item in sorted(items[task_id]):
                env = {**task.env, ITEM_ENV: item, INDEX_ENV: str(index)}
                item_id = item_task_id(task_id, index)
                tasks[item_id] = task.model_copy(
                    update={"task_id": item_id, "env": env, "map_over": None}
                )
            continue
        tasks[task_id] = task
    return spec.model_copy(update={"tasks": tasks})
