"""How a run moves forward: order, readiness, upstream_failed, and the fate of a try."""

from __future__ import annotations

import pytest

from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.progress import (
    NOT_RETRYABLE,
    after_try,
    evaluate,
    topological_order,
    waiting_on,
)
from leoflow.domain.states import TaskState

T = TaskState


def make(edges: dict[str, list[str]]) -> DagSpec:
    """``edges`` maps each task to its upstreams."""
    tasks = {t: TaskSpec(task_id=t, command="true", depends_on=ups) for t, ups in edges.items()}
    return DagSpec(dag_id="d", tasks=tasks)


CHAIN = make({"a": [], "b": ["a"], "c": ["b"], "d": ["c"]})
DIAMOND = make({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})


def states(spec: DagSpec, **given: TaskState) -> dict[str, TaskState]:
    return {t: given.get(t, T.NONE) for t in spec.tasks}


# --- topological_order


def test_order_of_a_chain_declared_backwards() -> None:
    spec = make({"d": ["c"], "c": ["b"], "b": ["a"], "a": []})
    assert topological_order(spec) == ("a", "b", "c", "d")


def test_order_ties_by_task_id() -> None:
    spec = make({"z": [], "m": [], "a": ["z"], "b": ["m"]})
    assert topological_order(spec) == ("m", "z", "a", "b")


def test_order_puts_every_upstream_first() -> None:
    spec = make(
        {
            "load": ["t1", "t2", "t3"],
            "t1": ["extract"],
            "t2": ["extract"],
            "t3": ["t1"],
            "extract": [],
            "notify": ["load"],
        }
    )
    order = topological_order(spec)
    assert sorted(order) == sorted(spec.tasks)
    position = {t: i for i, t in enumerate(order)}
    for task_id, task in spec.tasks.items():
        for upstream in task.depends_on:
            assert position[upstream] < position[task_id]


def test_order_refuses_a_cycle() -> None:
    spec = make({"a": [], "b": ["a", "c"], "c": ["b"]})
    with pytest.raises(ValueError, match=r"dependency cycle among \['b', 'c'\]"):
        topological_order(spec)


# --- evaluate


def test_roots_are_ready_at_start() -> None:
    result = evaluate(DIAMOND, topological_order(DIAMOND), states(DIAMOND))
    assert result.ready == ("a",)
    assert result.upstream_failed == ()


def test_fan_out_becomes_ready_after_success() -> None:
    result = evaluate(DIAMOND, topological_order(DIAMOND), states(DIAMOND, a=T.SUCCESS))
    assert result.ready == ("b", "c")


def test_fan_in_waits_for_every_upstream() -> None:
    order = topological_order(DIAMOND)
    waiting = evaluate(DIAMOND, order, states(DIAMOND, a=T.SUCCESS, b=T.SUCCESS, c=T.RUNNING))
    assert waiting.ready == ()
    done = evaluate(DIAMOND, order, states(DIAMOND, a=T.SUCCESS, b=T.SUCCESS, c=T.SUCCESS))
    assert done.ready == ("d",)


@pytest.mark.parametrize("upstream", [T.SCHEDULED, T.QUEUED, T.RUNNING, T.UP_FOR_RETRY])
def test_unfinished_upstream_blocks(upstream: TaskState) -> None:
    result = evaluate(CHAIN, topological_order(CHAIN), states(CHAIN, a=upstream))
    assert result.ready == ()
    assert result.upstream_failed == ()


def test_only_tasks_in_none_are_considered() -> None:
    given = states(CHAIN, a=T.SUCCESS, b=T.SCHEDULED)
    assert evaluate(CHAIN, topological_order(CHAIN), given).ready == ()


def test_skipped_upstream_skips_all_success_tasks_down_the_graph() -> None:
    # Airflow: all_success with a skipped upstream is skipped, and the skip propagates.
    result = evaluate(DIAMOND, topological_order(DIAMOND), states(DIAMOND, a=T.SKIPPED))
    assert result.ready == ()
    assert [t for t, _ in result.skipped] == ["b", "c", "d"]
    assert dict(result.skipped)["b"] == ("a",)
    mixed = states(DIAMOND, a=T.SUCCESS, b=T.SKIPPED, c=T.SUCCESS)
    result = evaluate(DIAMOND, topological_order(DIAMOND), mixed)
    assert result.ready == () and [t for t, _ in result.skipped] == ["d"]


def test_upstream_failed_propagates_down_a_chain_in_one_pass() -> None:
    given = states(CHAIN, a=T.FAILED)
    result = evaluate(CHAIN, topological_order(CHAIN), given)
    assert result.ready == ()
    assert result.upstream_failed == (("b", ("a",)), ("c", ("b",)), ("d", ("c",)))
    assert given["b"] is T.NONE  # the caller's mapping is not changed


def test_upstream_failed_names_only_the_failed_upstreams() -> None:
    given = states(DIAMOND, a=T.SUCCESS, b=T.FAILED, c=T.SUCCESS)
    result = evaluate(DIAMOND, topological_order(DIAMOND), given)
    assert result.upstream_failed == (("d", ("b",)),)


def test_upstream_failed_beats_an_unfinished_sibling() -> None:
    # d can never run once b failed, even while c is still running.
    given = states(DIAMOND, a=T.SUCCESS, b=T.FAILED, c=T.RUNNING)
    result = evaluate(DIAMOND, topological_order(DIAMOND), given)
    assert result.upstream_failed == (("d", ("b",)),)


def test_upstream_failed_upstream_propagates() -> None:
    given = states(CHAIN, a=T.SUCCESS, b=T.UPSTREAM_FAILED)
    result = evaluate(CHAIN, topological_order(CHAIN), given)
    assert result.upstream_failed == (("c", ("b",)), ("d", ("c",)))


def test_failure_does_not_touch_independent_branches() -> None:
    spec = make({"a": [], "b": ["a"], "x": [], "y": ["x"]})
    result = evaluate(spec, topological_order(spec), states(spec, a=T.FAILED, x=T.SUCCESS))
    assert result.ready == ("y",)
    assert result.upstream_failed == (("b", ("a",)),)


def test_waiting_on() -> None:
    given = states(DIAMOND, a=T.SUCCESS, b=T.SKIPPED, c=T.RUNNING)
    assert waiting_on(DIAMOND, "d", given) == ("c",)
    assert waiting_on(DIAMOND, "a", given) == ()


# --- after_try


@pytest.mark.parametrize(
    ("reason", "try_number", "max_tries", "state"),
    [
        ("success", 1, 1, T.SUCCESS),
        ("success", 3, 3, T.SUCCESS),
        ("exit_code", 1, 3, T.UP_FOR_RETRY),
        ("exit_code", 2, 3, T.UP_FOR_RETRY),
        ("exit_code", 3, 3, T.FAILED),  # the last try
        ("exit_code", 1, 1, T.FAILED),  # no retries
        ("exit_code", 4, 3, T.FAILED),  # beyond the last try
        ("timeout", 1, 2, T.UP_FOR_RETRY),
        ("cancelled", 1, 5, T.FAILED),  # not retryable
        ("secret", 1, 5, T.FAILED),  # not retryable
    ],
)
def test_after_try(reason: str, try_number: int, max_tries: int, state: TaskState) -> None:
    assert after_try(reason, try_number, max_tries) is state


def test_not_retryable_reasons() -> None:
    assert {"cancelled", "secret"} == NOT_RETRYABLE
    for reason in NOT_RETRYABLE:
        assert after_try(reason, 1, 100) is T.FAILED


def test_end_of_try_records_the_outcome_and_when_to_retry() -> None:
    from leoflow.domain.progress import end_of_try

    state, fields = end_of_try(
        "exit_code", try_number=1, max_tries=3, retry_delay=30.0, exit_code=2,
        message="exited with code 2", at=100.0,
    )  # fmt: skip
    assert state is TaskState.UP_FOR_RETRY
    assert fields == {
        "ended_at": 100.0,
        "exit_code": 2,
        "reason": "exit_code",
        "message": "exited with code 2",
        "next_retry_at": 130.0,
    }
    last, fields = end_of_try(
        "timeout", try_number=3, max_tries=3, retry_delay=30.0, exit_code=None,
        message="timed out", at=5.0,
    )  # fmt: skip
    assert last is TaskState.FAILED and "next_retry_at" not in fields


def test_a_try_whose_agent_died_is_rerun_uncounted_a_bounded_number_of_times() -> None:
    from leoflow.domain.progress import MAX_UNCOUNTED_TRIES, end_of_try

    declared = 1  # retries: 0
    max_tries, try_number = declared, 1
    for _ in range(MAX_UNCOUNTED_TRIES):
        state, fields = end_of_try(
            "agent_died", try_number=try_number, max_tries=max_tries, retry_delay=300.0,
            exit_code=None, message="agent died", at=10.0, declared_tries=declared,
        )  # fmt: skip
        assert state is TaskState.UP_FOR_RETRY
        assert fields["max_tries"] == max_tries + 1 and fields["next_retry_at"] == 10.0
        max_tries, try_number = max_tries + 1, try_number + 1
    # A task that keeps killing its own agent runs out of free tries.
    state, fields = end_of_try(
        "agent_died", try_number=try_number, max_tries=max_tries, retry_delay=300.0,
        exit_code=None, message="agent died", at=10.0, declared_tries=declared,
    )  # fmt: skip
    assert state is TaskState.FAILED and "max_tries" not in fields
