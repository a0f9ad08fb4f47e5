"""Run and task-instance states, and the transitions between them.

The tables are the contract the store enforces: a transition that is not
listed here is refused, whoever asks for it.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


class TaskState(StrEnum):
    NONE = "none"
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    UP_FOR_RETRY = "up_for_retry"
    UPSTREAM_FAILED = "upstream_failed"
    SKIPPED = "skipped"


RUN_TERMINAL = frozenset({RunState.SUCCESS, RunState.FAILED})
TASK_TERMINAL = frozenset(
    {TaskState.SUCCESS, TaskState.FAILED, TaskState.UPSTREAM_FAILED, TaskState.SKIPPED}
)
# States in which a task instance holds admission slots.
TASK_HOLDS_SLOTS = frozenset({TaskState.QUEUED, TaskState.RUNNING})
# States from which a task may still run (again).
TASK_UNFINISHED = frozenset(
    {
        TaskState.NONE,
        TaskState.SCHEDULED,
        TaskState.QUEUED,
        TaskState.RUNNING,
        TaskState.UP_FOR_RETRY,
    }
)

_T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    # A cancelled run fails what has not started; a failed upstream marks the rest.
    # -> success/failed from any state: marked by hand (leoflow/domain/marking.py).
    _T.NONE: frozenset({_T.SCHEDULED, _T.UPSTREAM_FAILED, _T.SKIPPED, _T.FAILED, _T.SUCCESS}),
    _T.SCHEDULED: frozenset(
        {_T.QUEUED, _T.UPSTREAM_FAILED, _T.SKIPPED, _T.FAILED, _T.NONE, _T.SUCCESS}
    ),
    # queued -> up_for_retry/failed: the launch failed or the pod never started.
    # -> none: cleared while live or waiting for a retry (the scheduler stops the try).
    _T.QUEUED: frozenset(
        {_T.RUNNING, _T.SUCCESS, _T.FAILED, _T.UP_FOR_RETRY, _T.SCHEDULED, _T.NONE}
    ),
    _T.RUNNING: frozenset({_T.SUCCESS, _T.FAILED, _T.UP_FOR_RETRY, _T.NONE}),
    _T.UP_FOR_RETRY: frozenset({_T.SCHEDULED, _T.FAILED, _T.UPSTREAM_FAILED, _T.NONE, _T.SUCCESS}),
    # Clearing a finished task instance re-runs it; marking sets it by hand.
    _T.SUCCESS: frozenset({_T.NONE, _T.FAILED}),
    _T.FAILED: frozenset({_T.NONE, _T.SUCCESS}),
    _T.UPSTREAM_FAILED: frozenset({_T.NONE, _T.SUCCESS, _T.FAILED}),
    _T.SKIPPED: frozenset({_T.NONE, _T.SUCCESS, _T.FAILED}),
}

_R = RunState
RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    _R.QUEUED: frozenset({_R.RUNNING, _R.FAILED}),
    _R.RUNNING: frozenset({_R.SUCCESS, _R.FAILED}),
    # Clearing a task of a finished run sets the run going again.
    _R.SUCCESS: frozenset({_R.RUNNING}),
    _R.FAILED: frozenset({_R.RUNNING}),
}


class IllegalTransition(ValueError):
    """A state change that the tables above do not allow."""


def check_task_transition(current: TaskState, new: TaskState) -> None:
    if new not in TASK_TRANSITIONS[current]:
        raise IllegalTransition(f"task instance cannot go from {current} to {new}")


def check_run_transition(current: RunState, new: RunState) -> None:
    if new not in RUN_TRANSITIONS[current]:
        raise IllegalTransition(f"run cannot go from {current} to {new}")


def run_outcome(task_states: list[TaskState]) -> RunState | None:
    """The run's final state once every task instance is terminal, else None."""
    if any(state not in TASK_TERMINAL for state in task_states):
        return None
    if any(state in (TaskState.FAILED, TaskState.UPSTREAM_FAILED) for state in task_states):
        return RunState.FAILED
    return RunState.SUCCESS
