"""How a run moves forward: which tasks become ready, which are upstream_failed,
and what a finished try turns into. Pure functions over states, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from leoflow.domain.dag import DagSpec
from leoflow.domain.states import TaskState

_OK_UPSTREAM = frozenset({TaskState.SUCCESS, TaskState.SKIPPED})
_BAD_UPSTREAM = frozenset({TaskState.FAILED, TaskState.UPSTREAM_FAILED})
# A try that ended for one of these reasons is not retried: retrying cannot help.
NOT_RETRYABLE = frozenset({"cancelled", "secret"})
# A try that ended for one of these reasons failed through no fault of the task (its
# agent died under it): it runs again without spending a retry. At most
# ``MAX_UNCOUNTED_TRIES`` times per task instance, so a task that kills its own agent
# cannot run forever.
NOT_COUNTED = frozenset({"agent_died"})
MAX_UNCOUNTED_TRIES = 3


def topological_order(spec: DagSpec) -> tuple[str, ...]:
    """Tasks with every upstream before its downstream, in layers; ties by task id.

    Kahn's algorithm, layer by layer: linear in tasks and edges, so a
    10,000-task chain costs no more than 10,000 independent tasks.
    """
    waiting = {task_id: len(set(task.depends_on)) for task_id, task in spec.tasks.items()}
    downstream: dict[str, list[str]] = {task_id: [] for task_id in spec.tasks}
    for task_id, task in spec.tasks.items():
        for upstream in set(task.depends_on):
            if upstream in downstream:  # an unknown upstream leaves its task waiting
                downstream[upstream].append(task_id)
    layer = sorted(t for t, count in waiting.items() if count == 0)
    order: list[str] = []
    while layer:
        order.extend(layer)
        following: list[str] = []
        for task_id in layer:
            for child in downstream[task_id]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    following.append(child)
        layer = sorted(following)
    if len(order) != len(waiting):
        raise ValueError(f"dependency cycle among {sorted(set(waiting) - set(order))}")
    return tuple(order)


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: tuple[str, ...]
    upstream_failed: tuple[tuple[str, tuple[str, ...]], ...]  # task, the failed upstreams


def evaluate(spec: DagSpec, order: tuple[str, ...], states: Mapping[str, TaskState]) -> Readiness:
    """Tasks still in ``none`` whose upstreams all succeeded, and those that can never run.

    Walks in topological order so an upstream_failed marking reaches every
    task below a failure in one pass.
    """
    current = dict(states)
    ready: list[str] = []
    failed: list[tuple[str, tuple[str, ...]]] = []
    for task_id in order:
        if current[task_id] is not TaskState.NONE:
            continue
        upstreams = spec.tasks[task_id].depends_on
        bad = tuple(u for u in upstreams if current[u] in _BAD_UPSTREAM)
        if bad:
            current[task_id] = TaskState.UPSTREAM_FAILED
            failed.append((task_id, bad))
        elif all(current[u] in _OK_UPSTREAM for u in upstreams):
            ready.append(task_id)
    return Readiness(tuple(ready), tuple(failed))


def after_try(reason: str, try_number: int, max_tries: int) -> TaskState:
    """The state a task instance takes when a try ends with ``reason``."""
    if reason == "success":
        return TaskState.SUCCESS
    if reason in NOT_RETRYABLE or try_number >= max_tries:
        return TaskState.FAILED
    return TaskState.UP_FOR_RETRY


def end_of_try(
    reason: str,
    *,
    try_number: int,
    max_tries: int,
    retry_delay: float,
    exit_code: int | None,
    message: str,
    at: float,
    declared_tries: int | None = None,
) -> tuple[TaskState, dict[str, object]]:
    """The state a try's end leads to and the fields to record with it.

    ``declared_tries`` is what the DAG allows (retries + 1); tries beyond it were
    granted for uncounted ends, and bound how many more may be granted.
    """
    fields: dict[str, object] = {
        "ended_at": at,
        "exit_code": exit_code,
        "reason": reason,
        "message": message,
    }
    if (
        reason in NOT_COUNTED
        and declared_tries is not None
        and max_tries - declared_tries < MAX_UNCOUNTED_TRIES
    ):
        fields["max_tries"] = max_tries + 1
        fields["next_retry_at"] = at
        return TaskState.UP_FOR_RETRY, fields
    new = after_try(reason, try_number, max_tries)
    if new is TaskState.UP_FOR_RETRY:
        fields["next_retry_at"] = at + retry_delay
    return new, fields


def waiting_on(spec: DagSpec, task_id: str, states: Mapping[str, TaskState]) -> tuple[str, ...]:
    """The upstreams a task in ``none`` still waits for."""
    return tuple(u for u in spec.tasks[task_id].depends_on if states[u] not in _OK_UPSTREAM)
