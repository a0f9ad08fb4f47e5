"""What a DAG must satisfy beyond its schema, once it validates: its upstreams exist and
make no cycle, its pools exist and are big enough, and its tasks set only the pod
fields the operator lets them (``taskPodPassthrough``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from leoflow.dagfile.cycles import cycle_text, find_cycle
from leoflow.domain.dag import DEFAULT_POOL, DagSpec

PASSTHROUGH_SETTING = "taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH)"

FieldProblem = tuple[tuple[str, ...], str]


def pool_problems(spec: DagSpec, known_pools: Collection[str]) -> list[FieldProblem]:
    """A task's pool must exist: the default, one the environment has, or one the file
    declares under ``pools:`` (created when the DAG is stored; see leoflow.domain.dag)."""
    known = {DEFAULT_POOL, *known_pools, *spec.pools}
    return [
        (
            ("tasks", task_id, "pool"),
            f"unknown pool {task.pool!r} (pools: {', '.join(sorted(known))}); declare it "
            "under pools: in this file, or create it in the settings (pools) or the API",
        )
        for task_id, task in spec.tasks.items()
        if task.pool not in known
    ]


def semantic_problems(
    spec: DagSpec,
    *,
    known_pools: Collection[str] | None,
    pool_sizes: Mapping[str, int] | None,
    passthrough: Collection[str] | None,
) -> list[FieldProblem]:
    """Every problem of a validated spec, as (field path, message); None skips a check
    (see ``LoadOptions``)."""
    problems: list[FieldProblem] = []
    if known_pools is not None:
        problems += pool_problems(spec, known_pools)
    known = sorted(spec.tasks)
    for task_id, task in spec.tasks.items():
        for index, upstream in enumerate(task.depends_on):
            if upstream == task_id:
                problems.append(
                    (("tasks", task_id, "depends_on", str(index)), "a task cannot depend on itself")
                )
            elif upstream not in spec.tasks:
                problems.append(
                    (
                        ("tasks", task_id, "depends_on", str(index)),
                        f"unknown task {upstream!r} (tasks in this DAG: {', '.join(known)})",
                    )
                )
        size = (pool_sizes or {}).get(task.pool)
        if size is None and task.pool in spec.pools:  # declared here, made if absent
            size = spec.pools[task.pool].slots
        if size is not None and task.pool_slots > size:
            problems.append(
                (
                    ("tasks", task_id, "pool_slots"),
                    f"task {task_id!r} needs {task.pool_slots} slots of pool {task.pool!r}, "
                    f"which has {size} in all, so it could never run; grow the pool "
                    f"(leoflow pools set {task.pool} {task.pool_slots}) or lower pool_slots",
                )
            )
        if passthrough is not None:
            allowed = set(passthrough)
            for name in task.execution.declared():
                if name not in allowed:
                    problems.append(
                        (
                            ("tasks", task_id, "execution", name),
                            f"task {task_id!r} sets execution.{name}, which the operator has not "
                            f"allowed; add '{name}' to {PASSTHROUGH_SETTING} to allow it",
                        )
                    )
            for side in ("requests", "limits"):
                amounts = getattr(task.resources, side)
                if amounts.ephemeral_storage is not None and "ephemeral_storage" not in allowed:
                    problems.append(
                        (
                            ("tasks", task_id, "resources", side, "ephemeral_storage"),
                            f"task {task_id!r} sets resources.{side}.ephemeral_storage, which the "
                            f"operator has not allowed; add 'ephemeral_storage' to "
                            f"{PASSTHROUGH_SETTING} to allow it",
                        )
                    )
    if not any(p[0][2:3] == ("depends_on",) for p in problems):
        cycle = find_cycle({t: s.depends_on for t, s in spec.tasks.items()})
        if cycle:
            problems.append(
                (
                    ("tasks", cycle[0], "depends_on"),
                    f"dependency cycle: {cycle_text(cycle)}"
                    " (each task would have to run before the next)",
                )
            )
    return problems
