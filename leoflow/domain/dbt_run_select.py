"""A run of part of a dbt DAG: ``{"dbt_select": ..., "dbt_exclude": ...}`` in a run's ``conf``.

The selection is dbt's syntax (as far as ``leoflow.domain.dbt_graph`` evaluates it),
over the graph of the manifest the DAG was loaded from: the DAG keeps that graph,
compact, in ``dbt.graph`` (``leoflow.domain.dbt_compact``), so a trigger needs no project on disk.
The run gets the dbt tasks whose node is selected (with the tests of selected models,
as dbt's own indirect selection does), and every ordinary task; the scheduler drops
dependencies on tasks a run lacks (``spec_for_tasks``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_compact import graph_of
from leoflow.domain.dbt_graph import SelectorError, select
from leoflow.domain.dbt_ids import TESTS_TASK
from leoflow.domain.dbt_waves import ENV_WAVE

CONF_SELECT = "dbt_select"
CONF_EXCLUDE = "dbt_exclude"
_RUNNABLE = ("model", "seed", "snapshot")


class RunSelectionError(ValueError):
    """A ``conf`` selection that cannot make a run; the message names the conf key."""


def _expressions(conf: Mapping[str, Any], key: str) -> list[str]:
    value = conf.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise RunSelectionError(f"conf.{key}: expected a dbt selector string or a list of them")


def run_tasks(spec: DagSpec, conf: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The tasks a run with this ``conf`` has; None: every task (no dbt selection)."""
    conf = conf or {}
    chosen_text, excluded_text = _expressions(conf, CONF_SELECT), _expressions(conf, CONF_EXCLUDE)
    if CONF_SELECT not in conf and CONF_EXCLUDE not in conf:
        return None
    compact = spec.dbt.graph if spec.dbt is not None else None
    if compact is None:
        raise RunSelectionError(
            f"conf.{CONF_SELECT}: DAG {spec.dag_id!r} has no dbt graph to select from "
            f"(no dbt: section, or one loaded before this version kept its graph)"
        )
    graph = graph_of(compact)
    key = CONF_SELECT
    try:
        chosen = select(graph, chosen_text) if chosen_text else set(graph.nodes)
        key = CONF_EXCLUDE
        excluded = select(graph, excluded_text)
    except SelectorError as exc:
        raise RunSelectionError(f"conf.{key}: {exc}") from exc
    matched = chosen - excluded
    runnable = {u for u in matched if graph.resource_type(u) in _RUNNABLE}
    tests = set()
    for uid in graph.nodes:
        if graph.resource_type(uid) != "test" or uid in excluded:
            continue
        ups = [u for u in graph.parents[uid] if graph.resource_type(u) != "source"]
        if uid in chosen or (ups and all(u in runnable for u in ups)):
            tests.add(uid)
    wanted = runnable | tests
    by_task: Mapping[str, str] = compact["tasks"]
    keep = {task for task, uid in by_task.items() if uid in wanted}
    if tests and TESTS_TASK in spec.tasks and TESTS_TASK not in by_task:
        keep.add(TESTS_TASK)
    if not keep:
        shown = " ".join(chosen_text) or "everything"
        raise RunSelectionError(
            f"conf.{CONF_SELECT}: selects no dbt task of DAG {spec.dag_id!r} "
            f"(select: {shown!r}"
            + (f", exclude: {' '.join(excluded_text)!r}" if excluded_text else "")
            + ")"
        )
    dbt_tasks = set(by_task) | {TESTS_TASK}
    return frozenset(keep | {t for t in spec.tasks if t not in dbt_tasks})


_PARTIAL: dict[int, tuple[DagSpec, dict[str, str]]] = {}


def partial_run_env(spec: DagSpec) -> dict[str, str]:
    """What every task of a run of part of a ``batch: wave`` DAG sees: no wave.

    A wave's leader runs the peers it proves ready, and cannot tell which are in the
    run; so a run that lacks some dbt task (a ``dbt_select`` run, or one older than
    the file) runs each dbt node alone. ``spec`` is the run's own (``spec_for_tasks``).
    """
    hit = _PARTIAL.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    env: dict[str, str] = {}
    dbt = spec.dbt
    graph = dbt.graph if dbt is not None and dbt.batch == "wave" else None
    if graph is not None and any(task not in spec.tasks for task in graph.get("tasks") or {}):
        env[ENV_WAVE] = ""
    if len(_PARTIAL) > 256:
        _PARTIAL.clear()
    _PARTIAL[id(spec)] = (spec, env)  # the spec is held, so its id is not reused
    return env
