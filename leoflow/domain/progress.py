"""How a run moves forward: which tasks become ready, which are upstream_failed or
skipped (by their trigger rules), what a finished try turns into, and how the run
ends. Pure functions over states, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from leoflow.domain.dag import DagSpec
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TASK_TERMINAL, RunState, TaskState
from leoflow.domain.trigger_rules import Counts, Decision, decide

_BAD_UPSTREAM = frozenset({TaskState.FAILED, TaskState.UPSTREAM_FAILED})
# A try that ended for one of these reasons is not retried: retrying cannot help.
NOT_RETRYABLE = frozenset({EndReason.CANCELLED, EndReason.SECRET})
# A try that ended for one of these reasons failed through no fault of the task (its
# agent died under it): it runs again without spending a retry. At most
# ``MAX_UNCOUNTED_TRIES`` times per task instance, so a task that kills its own agent
# cannot run forever.
NOT_COUNTED = frozenset({EndReason.AGENT_DIED})
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
    skipped: tuple[tuple[str, tuple[str, ...]], ...] = ()  # task, the upstreams that decided it


def evaluate(spec: DagSpec, order: tuple[str, ...], states: Mapping[str, TaskState]) -> Readiness:
    """Tasks still in ``none`` whose trigger rule is met, and those that can never run.

    Walks in topological order so an upstream_failed or skipped marking reaches
    every task below it in one pass, as Airflow's skips propagate.
    """
    current = dict(states)
    ready: list[str] = []
    failed: list[tuple[str, tuple[str, ...]]] = []
    skipped: list[tuple[str, tuple[str, ...]]] = []
    for task_id in order:
        if current[task_id] is not TaskState.NONE:
            continue
        task = spec.tasks[task_id]
        upstream_states = [current[u] for u in task.depends_on]
        decision = decide(task.trigger_rule, Counts.of(upstream_states))
        if decision is Decision.RUN:
            ready.append(task_id)
        elif decision is Decision.UPSTREAM_FAILED:
            current[task_id] = TaskState.UPSTREAM_FAILED
            failed.append(
                (task_id, tuple(u for u in task.depends_on if current[u] in _BAD_UPSTREAM))
            )
        elif decision is Decision.SKIP:
            current[task_id] = TaskState.SKIPPED
            skipped.append(
                (task_id, tuple(u for u in task.depends_on if current[u] in TASK_TERMINAL))
            )
    return Readiness(tuple(ready), tuple(failed), tuple(skipped))


def final_state(spec: DagSpec, states: Mapping[str, TaskState]) -> RunState | None:
    """The run's final state once every task instance is terminal, else None.

    Airflow's rule: the run failed if any *leaf* task (one nothing depends on)
    failed or is upstream_failed; otherwise it succeeded. So a failure that an
    ``all_done`` cleanup leaf absorbs does not fail the run, and a DAG of only
    ``all_success`` tasks fails exactly when any task failed.
    """
    if any(state not in TASK_TERMINAL for state in states.values()):
        return None
    if any(states[leaf] in _BAD_UPSTREAM for leaf in spec.leaves()):
        return RunState.FAILED
    return RunState.SUCCESS


def after_try(reason: str, try_number: int, max_tries: int) -> TaskState:
    """The state a task instance takes when a try ends with ``reason``."""
    if reason == EndReason.SUCCESS:
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
    """The upstreams a task in ``none`` still waits for (those not finished)."""
    return tuple(u for u in spec.tasks[task_id].depends_on if states[u] not in TASK_TERMINAL)
