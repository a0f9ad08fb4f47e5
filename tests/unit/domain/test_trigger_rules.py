"""Trigger rules against a reference model written from Airflow's documented table.

The model below is deliberately shaped differently from ``decide``: per rule, three
predicates over the list of upstream states (``skip_if``, ``fail_if``, ``run_if``),
read straight from the Airflow documentation ("Trigger Rules") and its
``trigger_rule_dep`` state changes. Every combination of upstream states up to
three upstreams is checked exhaustively; hypothesis covers longer lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.progress import evaluate, final_state, topological_order
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.trigger_rules import (
    TRIGGER_RULES,
    Counts,
    Decision,
    TriggerRule,
    decide,
    waiting_message,
)

T = TaskState
S = Sequence[TaskState]
FAILS = (T.FAILED, T.UPSTREAM_FAILED)
ENDED = (T.SUCCESS, T.SKIPPED, T.FAILED, T.UPSTREAM_FAILED)
PENDING = (T.NONE, T.SCHEDULED, T.QUEUED, T.RUNNING, T.UP_FOR_RETRY)
ALL_STATES = ENDED + PENDING


def _n(states: S, *which: TaskState) -> int:
    return sum(1 for s in states if s in which)


def _done(states: S) -> bool:
    return all(s in ENDED for s in states)


Pred = Callable[[S], bool]
NEVER: Pred = lambda s: False  # noqa: E731

# rule: (skip_if, upstream_failed_if, run_if); the first that holds wins, in that order
# for skip/fail as Airflow checks them (all_success checks failures before skips).
REFERENCE: dict[str, tuple[Pred, Pred, Pred]] = {
    "all_success": (
        lambda s: _n(s, *FAILS) == 0 and _n(s, T.SKIPPED) > 0,
        lambda s: _n(s, *FAILS) > 0,
        lambda s: all(x is T.SUCCESS for x in s),
    ),
    "all_failed": (
        lambda s: _n(s, T.SUCCESS, T.SKIPPED) > 0,
        NEVER,
        lambda s: all(x in FAILS for x in s),
    ),
    "all_done": (NEVER, NEVER, _done),
    "one_success": (
        lambda s: _done(s) and all(x is T.SKIPPED for x in s),
        lambda s: _done(s) and _n(s, T.SUCCESS) == 0 and not all(x is T.SKIPPED for x in s),
        lambda s: _n(s, T.SUCCESS) > 0,
    ),
    "one_failed": (
        lambda s: _done(s) and _n(s, *FAILS) == 0,
        NEVER,
        lambda s: _n(s, *FAILS) > 0,
    ),
    "none_failed": (
        NEVER,
        lambda s: _n(s, *FAILS) > 0,
        lambda s: all(x in (T.SUCCESS, T.SKIPPED) for x in s),
    ),
    "none_failed_min_one_success": (
        lambda s: _n(s, *FAILS) == 0 and all(x is T.SKIPPED for x in s),
        lambda s: _n(s, *FAILS) > 0,
        lambda s: all(x in (T.SUCCESS, T.SKIPPED) for x in s),
    ),
    "always": (NEVER, NEVER, lambda s: True),
}


def reference(rule: str, states: S) -> Decision:
    if not states:
        return Decision.RUN  # a task without upstreams runs, whatever its rule
    skip_if, fail_if, run_if = REFERENCE[rule]
    if fail_if(states):
        return Decision.UPSTREAM_FAILED
    if skip_if(states):
        return Decision.SKIP
    return Decision.RUN if run_if(states) else Decision.WAIT


def test_the_reference_covers_every_rule() -> None:
    assert set(REFERENCE) == set(TRIGGER_RULES)
    assert len(TRIGGER_RULES) == 8


COMBINATIONS = [
    combo for n in range(4) for combo in itertools.combinations_with_replacement(ALL_STATES, n)
]


@pytest.mark.parametrize("rule", TRIGGER_RULES)
def test_truth_table_of_every_rule(rule: str) -> None:
    mismatches = [
        (combo, decide(TriggerRule(rule), Counts.of(combo)), reference(rule, combo))
        for combo in COMBINATIONS
        if decide(TriggerRule(rule), Counts.of(combo)) is not reference(rule, combo)
    ]
    assert mismatches == []


@given(
    st.sampled_from(TRIGGER_RULES),
    st.lists(st.sampled_from(ALL_STATES), min_size=0, max_size=12),
)
def test_decide_matches_the_reference_on_longer_lists(rule: str, states: list[TaskState]) -> None:
    assert decide(TriggerRule(rule), Counts.of(states)) is reference(rule, states)


@given(st.sampled_from(TRIGGER_RULES), st.lists(st.sampled_from(ENDED), max_size=12))
def test_no_rule_waits_once_every_upstream_ended(rule: str, states: list[TaskState]) -> None:
    # Otherwise a run could never finish.
    assert decide(TriggerRule(rule), Counts.of(states)) is not Decision.WAIT


def test_airflow_examples() -> None:
    def d(rule: str, *s: TaskState) -> Decision:
        return decide(TriggerRule(rule), Counts.of(s))

    # all_success: failure wins over a skip; a skip alone skips.
    assert d("all_success", T.SKIPPED, T.FAILED) is Decision.UPSTREAM_FAILED
    assert d("all_success", T.SKIPPED, T.RUNNING) is Decision.SKIP
    # one_success runs on the first success, without waiting for the rest.
    assert d("one_success", T.SUCCESS, T.RUNNING, T.RUNNING) is Decision.RUN
    assert d("one_success", T.FAILED, T.SKIPPED) is Decision.UPSTREAM_FAILED
    # all_done runs after failures; always does not even wait.
    assert d("all_done", T.FAILED, T.UPSTREAM_FAILED, T.SKIPPED) is Decision.RUN
    assert d("always", T.RUNNING) is Decision.RUN
    assert d("none_failed_min_one_success", T.SKIPPED, T.SKIPPED) is Decision.SKIP
    assert d("none_failed_min_one_success", T.SKIPPED, T.SUCCESS) is Decision.RUN
    assert d("none_failed", T.SKIPPED, T.SKIPPED) is Decision.RUN


def test_waiting_message_counts_what_is_still_running() -> None:
    counts = Counts.of([T.FAILED, T.RUNNING, T.UP_FOR_RETRY])
    assert waiting_message(TriggerRule.ONE_SUCCESS, counts) == (
        "trigger rule one_success: waiting for any of 3 upstreams to succeed; 2 not finished"
    )


def _spec(tasks: dict[str, tuple[list[str], str]]) -> DagSpec:
    return DagSpec(
        dag_id="d",
        tasks={
            t: TaskSpec(task_id=t, command="true", depends_on=ups, trigger_rule=rule)
            for t, (ups, rule) in tasks.items()
        },
    )


def test_skips_propagate_and_cleanup_runs_after_a_failure() -> None:
    spec = _spec(
        {
            "work": ([], "all_success"),
            "on_fail": (["work"], "one_failed"),
            "report": (["on_fail"], "all_success"),
            "cleanup": (["work", "report"], "all_done"),
        }
    )
    order = topological_order(spec)
    ok = {"work": T.SUCCESS, "on_fail": T.NONE, "report": T.NONE, "cleanup": T.NONE}
    result = evaluate(spec, order, ok)
    # on_fail is skipped, report below it is skipped in the same pass, cleanup runs.
    assert [t for t, _ in result.skipped] == ["on_fail", "report"]
    assert result.ready == ("cleanup",)
    ended = {"work": T.SUCCESS, "on_fail": T.SKIPPED, "report": T.SKIPPED, "cleanup": T.SUCCESS}
    assert final_state(spec, ended) is RunState.SUCCESS


def test_run_outcome_follows_the_leaves_as_airflow_does() -> None:
    spec = _spec({"work": ([], "all_success"), "cleanup": (["work"], "all_done")})
    assert final_state(spec, {"work": T.FAILED, "cleanup": T.SUCCESS}) is RunState.SUCCESS
    assert final_state(spec, {"work": T.FAILED, "cleanup": T.FAILED}) is RunState.FAILED
    assert final_state(spec, {"work": T.FAILED, "cleanup": T.NONE}) is None
    chain = _spec({"a": ([], "all_success"), "b": (["a"], "all_success")})
    assert final_state(chain, {"a": T.FAILED, "b": T.UPSTREAM_FAILED}) is RunState.FAILED
    assert final_state(chain, {"a": T.SKIPPED, "b": T.SKIPPED}) is RunState.SUCCESS
