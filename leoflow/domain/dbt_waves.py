"""``dbt.batch: wave``: which dbt tasks may share one dbt invocation.

A wave is the dbt tasks at the same depth of the dbt task graph (the longest chain
of dbt tasks above them; ordinary tasks do not count). No task of a wave depends on
another, so dbt can build them in one ``dbt build`` and none is held back by a
failure of another.

The plan only says who *may* go together; the scheduler still sees one ordinary
task per node with its own dependencies, pool and retries. Which members actually
run in one invocation is decided when the first of them starts (the leader,
``leoflow.dbt.wave``): only those whose upstreams are proven done. Pure: the
adapter writes the plan to a file the tasks read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PLAN_VERSION = 1
# What the task wrapper reads from its env (set on every dbt task of a wave DAG).
ENV_PLAN = "LEOFLOW_DBT_WAVES"  # the plan file
ENV_WAVE = "LEOFLOW_DBT_WAVE"  # this task's wave, when it has peers
ENV_RUNS = "LEOFLOW_DBT_RUNS"  # where runs keep their members' states


def depths(tasks: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each dbt task's depth: 0 without dbt upstreams, else one more than the deepest."""
    out: dict[str, int] = {}
    for root in sorted(tasks):
        stack = [root]
        while stack:
            task_id = stack[-1]
            if task_id in out:
                stack.pop()
                continue
            ups = [u for u in tasks[task_id].get("depends_on") or () if u in tasks]
            pending = [u for u in ups if u not in out]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            out[task_id] = 1 + max((out[u] for u in ups), default=-1)
    return out


def plan_waves(
    tasks: Mapping[str, Mapping[str, Any]],
    uids: Mapping[str, str],
    selectors: Mapping[str, list[str]],
    solo: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The waves of ``tasks`` (raw dbt task mappings) with two members or more.

    ``uids`` and ``selectors`` name each task's dbt node; tasks in ``solo`` (the
    after_all tests task) are in no wave. Each member lists its dbt upstreams and its
    other upstreams: the leader runs a peer only when it can prove both are done.
    """
    depth = depths(tasks)
    grouped: dict[int, list[str]] = {}
    for task_id in sorted(tasks):
        if task_id not in solo and task_id in uids:
            grouped.setdefault(depth[task_id], []).append(task_id)
    waves: dict[str, dict[str, Any]] = {}
    for level, members in sorted(grouped.items()):
        if len(members) < 2:
            continue
        wave: dict[str, Any] = {}
        for task_id in members:
            ups = sorted(tasks[task_id].get("depends_on") or ())
            wave[task_id] = {
                "uid": uids[task_id],
                "select": list(selectors[task_id]),
                "dbt_deps": [u for u in ups if u in tasks],
                "other_deps": [u for u in ups if u not in tasks],
            }
        waves[str(level)] = wave
    return {"version": PLAN_VERSION, "waves": waves}


def wave_of(plan: Mapping[str, Any]) -> dict[str, str]:
    """task id -> its wave, for the members of a plan."""
    return {t: level for level, wave in plan["waves"].items() for t in wave}
