"""Why a task instance waits: every reason, with its numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from leoflow.domain.explain import (
    AdmissionSnapshot,
    Explanation,
    Limits,
    RunGate,
    RunInfo,
    count_running_and_older,
    explain,
)
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance

NOW = 1_700_000_000.0
RUN = RunInfo(1, "etl", "r1", RunState.RUNNING, 100.0)


def ti(key: int, state: TaskState = TaskState.SCHEDULED, **kw: object) -> TaskInstance:
    values: dict[str, object] = {
        "pk": key,
        "run_pk": 1,
        "dag_id": "etl",
        "run_id": "r1",
        "task_id": f"t{key}",
        "state": state,
        "try_number": 0,
        "max_tries": 1,
        "pool": "default_pool",
        "pool_slots": 1,
        "priority": 0,
        "ready_at": float(key),
        "queued_at": None,
        "started_at": None,
        "ended_at": None,
        "next_retry_at": None,
        "heartbeat_at": None,
        "exit_code": None,
        "reason": None,
        "message": None,
        "executor_ref": None,
        "updated_at": 0.0,
    }
    values.update(kw)
    return TaskInstance(**values)  # type: ignore[arg-type]


def limits(**kw: object) -> Limits:
    values: dict[str, object] = {
        "parallelism": 32,
        "default_pool_slots": 128,
        "pools": {},
        "dag_max_active_tasks": {"etl": 16},
    }
    values.update(kw)
    return Limits(**values)  # type: ignore[arg-type]


def why_scheduled(
    target: TaskInstance, held: list[TaskInstance], waiting: list[TaskInstance], lim: Limits
) -> Explanation:
    snap = AdmissionSnapshot(lim, held, waiting, {1: 100.0, 2: 50.0})
    return explain(target, RUN, now=NOW, snapshot=snap)


def test_parallelism_with_numbers() -> None:
    held = [ti(k, TaskState.RUNNING, dag_id="other") for k in range(10, 13)]
    target = ti(1)
    answer = why_scheduled(target, held, [target], limits(parallelism=3))
    assert answer.waiting and answer.reason == "parallelism"
    assert (answer.used, answer.limit, answer.needed) == (3, 3, 1)
    assert answer.message == "parallelism: 3 of 3 task slots in use"


def test_dag_max_active_tasks_with_numbers() -> None:
    held = [ti(k, TaskState.QUEUED) for k in range(10, 12)]
    target = ti(1)
    answer = why_scheduled(target, held, [target], limits(dag_max_active_tasks={"etl": 2}))
    assert answer.reason == "dag_max_active_tasks"
    assert (answer.used, answer.limit) == (2, 2)
    assert answer.message == "DAG etl has 2 of 2 max_active_tasks running"


def test_pool_slots_with_numbers() -> None:
    held = [ti(10, TaskState.RUNNING, pool="warehouse", pool_slots=2)]
    target = ti(1, pool="warehouse", pool_slots=2)
    answer = why_scheduled(target, held, [target], limits(pools={"warehouse": 3}))
    assert answer.reason == "pool_slots"
    assert (answer.used, answer.limit, answer.needed) == (2, 3, 2)
    assert answer.message == "pool warehouse has 1 of 3 slots free; this task needs 2"


def test_the_binding_limit_first_and_the_others_after() -> None:
    held = [ti(10, TaskState.RUNNING, pool="warehouse")]
    target = ti(1, pool="warehouse")
    lim = limits(parallelism=1, pools={"warehouse": 1}, dag_max_active_tasks={"etl": 1})
    answer = why_scheduled(target, held, [target], lim)
    assert [answer.reason, *(b.reason for b in answer.also)] == [
        "dag_max_active_tasks",
        "pool_slots",
        "parallelism",
    ]


def test_ahead_in_line_takes_the_last_slot() -> None:
    """Two wait for one slot: the higher priority one is admitted next tick, the other
    is told the slot is (about to be) taken."""
    first = ti(1, priority=5)
    second = ti(2)
    lim = limits(parallelism=1)
    assert why_scheduled(first, [], [first, second], lim).reason == "admit_next_tick"
    answer = why_scheduled(second, [], [first, second], lim)
    assert answer.reason == "parallelism" and (answer.used, answer.limit) == (1, 1)


def test_older_run_goes_first_at_equal_priority() -> None:
    mine = ti(1)  # run 1, created at 100
    older = ti(2, run_pk=2)  # run 2, created at 50
    answer = why_scheduled(mine, [], [mine, older], limits(parallelism=1))
    assert answer.reason == "parallelism"


def test_missing_and_too_small_pools() -> None:
    target = ti(1, pool="gpu")
    assert why_scheduled(target, [], [target], limits()).reason == "pool_missing"
    big = ti(1, pool="gpu", pool_slots=4)
    answer = why_scheduled(big, [], [big], limits(pools={"gpu": 2}))
    assert answer.reason == "pool_too_small" and (answer.limit, answer.needed) == (2, 4)


def test_nothing_blocks() -> None:
    target = ti(1)
    answer = why_scheduled(target, [], [target], limits())
    assert not answer.waiting and answer.reason == "admit_next_tick"


def test_target_must_be_offered() -> None:
    with pytest.raises(ValueError, match="not among the waiting"):
        why_scheduled(ti(1), [], [], limits(parallelism=0))


def test_upstreams_named_with_their_states() -> None:
    target = ti(3, TaskState.NONE)
    states = {"a": TaskState.SUCCESS, "b": TaskState.RUNNING, "c": TaskState.UP_FOR_RETRY}
    answer = explain(target, RUN, now=NOW, depends_on=["a", "b", "c"], run_task_states=states)
    assert answer.reason == "upstream" and answer.waiting
    assert answer.upstreams == (("b", TaskState.RUNNING), ("c", TaskState.UP_FOR_RETRY))
    assert (answer.used, answer.limit) == (1, 3)
    assert answer.message == (
        "waiting for 2 of 3 upstream tasks; still running: b (running); "
        "not yet running: c (up_for_retry)"
    )


def test_upstreams_done_or_failed() -> None:
    target = ti(3, TaskState.NONE)
    done = explain(target, RUN, now=NOW, depends_on=["a"], run_task_states={"a": TaskState.SUCCESS})
    assert done.reason == "schedule_next_tick" and not done.waiting
    skipped = explain(
        target, RUN, now=NOW, depends_on=["a"], run_task_states={"a": TaskState.SKIPPED}
    )
    assert skipped.reason == "skipped" and not skipped.waiting
    failed = explain(
        target, RUN, now=NOW, depends_on=["a"], run_task_states={"a": TaskState.FAILED}
    )
    assert failed.reason == "upstream_failed" and "a" in failed.message


def test_retry_delay_says_when() -> None:
    target = ti(1, TaskState.UP_FOR_RETRY, try_number=1, max_tries=3, next_retry_at=NOW + 90)
    answer = explain(target, RUN, now=NOW)
    assert answer.reason == "retry_delay" and answer.waiting
    assert answer.retry_at == NOW + 90
    assert (answer.used, answer.limit) == (1, 3)
    assert answer.message == (
        "try 1 failed; try 2 of 3 is due at 2023-11-14T22:14:50+00:00 (in 1m30s)"
    )
    due = explain(replace(target, next_retry_at=NOW - 1), RUN, now=NOW)
    assert due.reason == "retry_due" and not due.waiting


def test_queued_run_max_active_runs() -> None:
    run = replace(RUN, state=RunState.QUEUED)
    answer = explain(ti(1, TaskState.NONE), run, now=NOW, gate=RunGate(1, 1, 0))
    assert answer.reason == "max_active_runs" and answer.waiting
    assert (answer.used, answer.limit) == (1, 1)
    assert answer.message == "run r1 is queued: DAG etl has 1 of 1 max_active_runs running"
    behind = explain(ti(1, TaskState.NONE), run, now=NOW, gate=RunGate(2, 1, 1))
    assert behind.reason == "max_active_runs"
    assert "1 older queued run ahead of it" in behind.message
    room = explain(ti(1, TaskState.NONE), run, now=NOW, gate=RunGate(3, 1, 1))
    assert room.reason == "run_start_next_tick" and not room.waiting


def test_count_running_and_older() -> None:
    me = RunInfo(5, "etl", "me", RunState.QUEUED, 100.0)
    runs = [
        me,
        RunInfo(1, "etl", "a", RunState.RUNNING, 10.0),
        RunInfo(2, "etl", "b", RunState.QUEUED, 50.0),
        RunInfo(6, "etl", "c", RunState.QUEUED, 100.0),  # same age, later pk: behind
        RunInfo(3, "other", "d", RunState.RUNNING, 1.0),
        RunInfo(4, "etl", "e", RunState.SUCCESS, 1.0),
    ]
    assert count_running_and_older(runs, me) == (1, 1)


def test_states_that_do_not_wait() -> None:
    assert explain(ti(1, TaskState.RUNNING, try_number=2, max_tries=3), RUN, now=NOW).message == (
        "running: try 2 of 3"
    )
    assert explain(ti(1, TaskState.QUEUED, try_number=1), RUN, now=NOW).reason == "launching"
    assert explain(ti(1, TaskState.SUCCESS), RUN, now=NOW).message == "finished: success"
    failed_run = replace(RUN, state=RunState.FAILED)
    assert explain(ti(1, TaskState.RUNNING), failed_run, now=NOW).reason == "run_finished"


def test_missing_inputs_are_errors() -> None:
    with pytest.raises(ValueError, match="admission snapshot"):
        explain(ti(1), RUN, now=NOW)
    with pytest.raises(ValueError, match="task states"):
        explain(ti(1, TaskState.NONE), RUN, now=NOW)
    with pytest.raises(ValueError, match="run gate"):
        explain(ti(1, TaskState.NONE), replace(RUN, state=RunState.QUEUED), now=NOW)


def test_a_queued_try_waiting_for_the_apiserver_says_since_when() -> None:
    note = "apiserver unreachable since 07:35:31 UTC; retrying"
    waiting = ti(1, TaskState.QUEUED, try_number=1, reason="apiserver_unreachable", message=note)
    answer = explain(waiting, RUN, now=NOW)
    assert (answer.waiting, answer.reason, answer.message) == (True, "apiserver_unreachable", note)
    # A note left from an earlier try's end (a failure reason) is not a waiting reason.
    old = ti(1, TaskState.QUEUED, try_number=2, reason="exit_code", message="exited 1")
    assert explain(old, RUN, now=NOW).reason == "launching"


def test_a_queued_try_waiting_for_a_warm_pod_says_so_not_a_slot() -> None:
    for reason, note in (
        ("warm_pod_starting", "admitted (it holds its slots); waiting for a warm pod to start"),
        ("warm_pod_limit", "admitted (it holds its slots); waiting for a warm pod of its shape"),
    ):
        waiting = ti(1, TaskState.QUEUED, try_number=1, reason=reason, message=note)
        answer = explain(waiting, RUN, now=NOW)
        assert (answer.waiting, answer.reason, answer.message) == (True, reason, note)
