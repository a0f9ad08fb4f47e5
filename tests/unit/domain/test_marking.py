"""Which tasks a mark, a clear and a clear-failed take, and which go back to none."""

from __future__ import annotations

from leoflow.domain.marking import plan
from leoflow.domain.states import TaskState as T

# a -> b -> c ; a -> handler ; x alone
DOWN = {"a": ["b", "handler"], "b": ["c"], "c": [], "handler": [], "x": []}
UP = {"a": [], "b": ["a"], "c": ["b"], "handler": ["a"], "x": []}
STATES = {
    "a": (T.FAILED, 1),
    "b": (T.UPSTREAM_FAILED, 0),
    "c": (T.UPSTREAM_FAILED, 0),
    "handler": (T.SUCCESS, 1),
    "x": (T.SKIPPED, 0),
}


def _plan(
    action: str, task: str, down: bool = False, up: bool = False
) -> tuple[list[str], list[str]]:
    return plan(action, task, DOWN, UP, STATES, with_downstream=down, with_upstream=up)


def test_a_mark_reopens_the_tasks_below_a_trigger_rule_decided_but_not_those_that_ran() -> None:
    assert _plan("success", "a") == (["a"], ["b", "c"])  # handler ran: kept
    assert _plan("success", "a", down=True) == (["a", "b", "c", "handler"], [])
    assert _plan("failed", "c", up=True) == (["a", "b", "c"], [])
    assert _plan("success", "b") == (["b"], ["c"])
    assert _plan("success", "x") == (["x"], [])


def test_clear_and_clear_failed() -> None:
    assert _plan("clear", "a") == (["a"], [])
    assert _plan("clear", "a", down=True) == (["a", "b", "c", "handler"], [])
    # Failed and upstream-failed, not a skipped or succeeded task.
    assert _plan("clear_failed", "") == (["a", "b", "c"], [])


def test_a_skipped_task_that_ran_is_not_reopened() -> None:
    ran = {**STATES, "b": (T.SKIPPED, 1)}
    assert plan("success", "a", DOWN, UP, ran, with_downstream=False, with_upstream=False) == (
        ["a"],
        ["c"],
    )
