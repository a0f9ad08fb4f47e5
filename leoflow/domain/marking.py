"""Marking task instances success or failed by hand, as Airflow's "mark success/failed".

Which tasks a mark takes (the task, with ``downstream`` the tasks below it, with
``upstream`` the tasks above it), what each marked one is set to, and which tasks
below a mark go back to ``none`` so that the scheduler decides them again by
their trigger rules: the ones a trigger rule decided without running them
(``upstream_failed``, or ``skipped`` with no try). A task that ran keeps its state.

One rule for a running run (the scheduler applies it) and a finished one (the
API writes it, and the run goes back to running for the scheduler to finish).

Pure: no I/O, nothing above the domain.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TaskState

MARKS = {"success": TaskState.SUCCESS, "failed": TaskState.FAILED}
# The request kinds a clear request row may hold (``action``).
ACTIONS = ("clear", "clear_failed", *MARKS)
# What "clear failed" takes: as Airflow's "only failed", the tasks that did not run
# because of them too.
FAILED_STATES = (TaskState.FAILED, TaskState.UPSTREAM_FAILED)


def walk(start: str, edges: Mapping[str, Sequence[str]]) -> set[str]:
    """Every task reachable from ``start`` along ``edges``, without ``start``."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen and nxt != start:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def mark_closure(
    task_id: str,
    downstream: Mapping[str, Sequence[str]],
    upstream: Mapping[str, Sequence[str]],
    *,
    with_downstream: bool,
    with_upstream: bool,
) -> list[str]:
    """``task_id`` and, as asked, the tasks below and above it; sorted."""
    names = {task_id}
    if with_downstream:
        names |= walk(task_id, downstream)
    if with_upstream:
        names |= walk(task_id, upstream)
    return sorted(names)


def decided_by_rule(state: TaskState, try_number: int) -> bool:
    """A state a trigger rule gave a task that never ran: the scheduler may decide again."""
    return try_number == 0 and state in (TaskState.UPSTREAM_FAILED, TaskState.SKIPPED)


def reopened(
    marked: Collection[str],
    downstream: Mapping[str, Sequence[str]],
    states: Mapping[str, tuple[TaskState, int]],
) -> list[str]:
    """The tasks below ``marked`` (not marked themselves) that a trigger rule decided
    without running them: they go back to ``none``. ``states``: (state, try number)."""
    below: set[str] = set()
    for name in marked:
        below |= walk(name, downstream)
    return sorted(n for n in below - set(marked) if n in states and decided_by_rule(*states[n]))


def marked_fields(state: TaskState, by: str, at: float, *, stopped: bool) -> dict[str, Any]:
    """The fields of a task instance marked ``state`` by ``by`` at ``at``. ``stopped``:
    its try was live and the mark ends it."""
    note = " (its live try stopped)" if stopped else ""
    return {
        "ended_at": at,
        "next_retry_at": None,
        "heartbeat_at": None,
        "reason": EndReason.MARKED,
        "message": f"marked {state.value} by {by}{note}",
    }


def reopened_fields(by: str) -> dict[str, Any]:
    """The fields of a task below a mark going back to ``none``."""
    return {
        "ready_at": None,
        "ended_at": None,
        "reason": None,
        "message": f"to be decided again: an upstream task was marked by {by}",
    }


def plan(
    action: str,
    task_id: str,
    downstream_of: Mapping[str, Sequence[str]],
    upstream_of: Mapping[str, Sequence[str]],
    states: Mapping[str, tuple[TaskState, int]],
    *,
    with_downstream: bool,
    with_upstream: bool,
) -> tuple[list[str], list[str]]:
    """What a request does to a run whose tasks are in ``states`` (state, try number):
    the tasks it clears or marks, and the tasks below a mark that go back to ``none``."""
    if action == "clear_failed":
        return sorted(t for t, (state, _) in states.items() if state in FAILED_STATES), []
    if action == "clear":
        return sorted({task_id} | (walk(task_id, downstream_of) if with_downstream else set())), []
    names = mark_closure(
        task_id,
        downstream_of,
        upstream_of,
        with_downstream=with_downstream,
        with_upstream=with_upstream,
    )
    return names, reopened(names, downstream_of, states)
