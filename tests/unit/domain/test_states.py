"""The state machine tables, and how a run's outcome follows from its tasks."""

from __future__ import annotations

import itertools

import pytest

from leoflow.domain.states import (
    RUN_TERMINAL,
    RUN_TRANSITIONS,
    TASK_HOLDS_SLOTS,
    TASK_TERMINAL,
    TASK_TRANSITIONS,
    TASK_UNFINISHED,
    IllegalTransition,
    RunState,
    TaskState,
    check_run_transition,
    check_task_transition,
    run_outcome,
)

T = TaskState
R = RunState

TASK_ALLOWED = {
    (T.NONE, T.SCHEDULED),
    (T.NONE, T.UPSTREAM_FAILED),
    (T.NONE, T.SKIPPED),
    (T.NONE, T.FAILED),
    (T.SCHEDULED, T.QUEUED),
    (T.SCHEDULED, T.UPSTREAM_FAILED),
    (T.SCHEDULED, T.SKIPPED),
    (T.SCHEDULED, T.FAILED),
    (T.SCHEDULED, T.NONE),
    (T.QUEUED, T.RUNNING),
    (T.QUEUED, T.SUCCESS),
    (T.QUEUED, T.FAILED),
    (T.QUEUED, T.UP_FOR_RETRY),
    (T.QUEUED, T.SCHEDULED),
    (T.QUEUED, T.NONE),  # cleared while live: the scheduler stops the try
    (T.RUNNING, T.SUCCESS),
    (T.RUNNING, T.FAILED),
    (T.RUNNING, T.UP_FOR_RETRY),
    (T.RUNNING, T.NONE),
    (T.UP_FOR_RETRY, T.SCHEDULED),
    (T.UP_FOR_RETRY, T.FAILED),
    (T.UP_FOR_RETRY, T.UPSTREAM_FAILED),
    (T.UP_FOR_RETRY, T.NONE),
    (T.SUCCESS, T.NONE),
    (T.FAILED, T.NONE),
    (T.UPSTREAM_FAILED, T.NONE),
    (T.SKIPPED, T.NONE),
    # Marked by hand (leoflow/domain/marking.py): to success or failed from any state.
    (T.NONE, T.SUCCESS),
    (T.SCHEDULED, T.SUCCESS),
    (T.UP_FOR_RETRY, T.SUCCESS),
    (T.SUCCESS, T.FAILED),
    (T.FAILED, T.SUCCESS),
    (T.UPSTREAM_FAILED, T.SUCCESS),
    (T.UPSTREAM_FAILED, T.FAILED),
    (T.SKIPPED, T.SUCCESS),
    (T.SKIPPED, T.FAILED),
}
RUN_ALLOWED = {
    (R.QUEUED, R.RUNNING),
    (R.QUEUED, R.FAILED),
    (R.RUNNING, R.SUCCESS),
    (R.RUNNING, R.FAILED),
    (R.SUCCESS, R.RUNNING),
    (R.FAILED, R.RUNNING),
}


def test_task_table_is_exactly_the_documented_one() -> None:
    table = {(a, b) for a, targets in TASK_TRANSITIONS.items() for b in targets}
    assert table == TASK_ALLOWED
    assert set(TASK_TRANSITIONS) == set(TaskState)


def test_run_table_is_exactly_the_documented_one() -> None:
    table = {(a, b) for a, targets in RUN_TRANSITIONS.items() for b in targets}
    assert table == RUN_ALLOWED
    assert set(RUN_TRANSITIONS) == set(RunState)


@pytest.mark.parametrize(("current", "new"), sorted(TASK_ALLOWED))
def test_allowed_task_transitions_pass(current: TaskState, new: TaskState) -> None:
    check_task_transition(current, new)


@pytest.mark.parametrize(("current", "new"), sorted(RUN_ALLOWED))
def test_allowed_run_transitions_pass(current: RunState, new: RunState) -> None:
    check_run_transition(current, new)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (T.NONE, T.QUEUED),  # admission needs upstreams done first
        (T.NONE, T.RUNNING),
        (T.SCHEDULED, T.RUNNING),
        (T.RUNNING, T.QUEUED),
        (T.RUNNING, T.SCHEDULED),
        (T.RUNNING, T.SKIPPED),
        (T.RUNNING, T.UPSTREAM_FAILED),
        (T.UP_FOR_RETRY, T.RUNNING),
        (T.SUCCESS, T.RUNNING),
        (T.FAILED, T.UP_FOR_RETRY),
        (T.UPSTREAM_FAILED, T.SCHEDULED),
    ],
)
def test_forbidden_task_transitions_raise(current: TaskState, new: TaskState) -> None:
    with pytest.raises(IllegalTransition) as info:
        check_task_transition(current, new)
    assert str(info.value) == f"task instance cannot go from {current} to {new}"


@pytest.mark.parametrize(
    ("current", "new"),
    [(R.QUEUED, R.SUCCESS), (R.RUNNING, R.QUEUED), (R.SUCCESS, R.FAILED), (R.FAILED, R.QUEUED)],
)
def test_forbidden_run_transitions_raise(current: RunState, new: RunState) -> None:
    with pytest.raises(IllegalTransition, match=f"run cannot go from {current} to {new}"):
        check_run_transition(current, new)


def test_no_state_transitions_to_itself() -> None:
    for state in TaskState:
        with pytest.raises(IllegalTransition):
            check_task_transition(state, state)
    for run_state in RunState:
        with pytest.raises(IllegalTransition):
            check_run_transition(run_state, run_state)


def test_every_forbidden_pair_raises() -> None:
    for current, new in itertools.product(TaskState, TaskState):
        if (current, new) not in TASK_ALLOWED:
            with pytest.raises(IllegalTransition):
                check_task_transition(current, new)


def test_terminal_task_states_only_leave_by_clearing_or_marking() -> None:
    for state in TASK_TERMINAL:
        assert TASK_TRANSITIONS[state] == {T.NONE, T.SUCCESS, T.FAILED} - {state}
    for run_state in RUN_TERMINAL:
        assert RUN_TRANSITIONS[run_state] == {R.RUNNING}


def test_state_groups() -> None:
    assert {T.QUEUED, T.RUNNING} == TASK_HOLDS_SLOTS
    assert set(TaskState) == TASK_TERMINAL | TASK_UNFINISHED
    assert not TASK_TERMINAL & TASK_UNFINISHED
    assert TASK_HOLDS_SLOTS <= TASK_UNFINISHED


def test_slots_are_only_taken_through_queued() -> None:
    # A slot is held from queued on: the only way into a holding state is via queued.
    for current, targets in TASK_TRANSITIONS.items():
        if current not in TASK_HOLDS_SLOTS:
            assert not targets & TASK_HOLDS_SLOTS - {T.QUEUED}, current
    assert {s for s, targets in TASK_TRANSITIONS.items() if T.QUEUED in targets} == {T.SCHEDULED}


def test_states_are_strings() -> None:
    assert str(T.UP_FOR_RETRY) == "up_for_retry"
    assert T("up_for_retry") is T.UP_FOR_RETRY
    assert R("success") is R.SUCCESS


@pytest.mark.parametrize(
    ("states", "outcome"),
    [
        ([T.SUCCESS, T.SUCCESS], R.SUCCESS),
        ([T.SUCCESS, T.SKIPPED], R.SUCCESS),
        ([T.SKIPPED], R.SUCCESS),
        ([T.SUCCESS, T.FAILED], R.FAILED),
        ([T.SUCCESS, T.UPSTREAM_FAILED], R.FAILED),
        ([T.FAILED, T.UPSTREAM_FAILED, T.SKIPPED], R.FAILED),
        ([T.SUCCESS, T.RUNNING], None),
        ([T.FAILED, T.NONE], None),
        ([T.FAILED, T.UP_FOR_RETRY], None),
        ([T.SUCCESS, T.SCHEDULED], None),
        ([T.QUEUED], None),
    ],
)
def test_run_outcome(states: list[TaskState], outcome: RunState | None) -> None:
    assert run_outcome(states) is outcome
