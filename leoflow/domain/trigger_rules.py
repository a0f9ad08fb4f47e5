"""Trigger rules: when a task may run given the states of its direct upstreams.

The semantics are Airflow's (``airflow/ti_deps/deps/trigger_rule_dep.py`` with
``flag_upstream_failed``): each rule first says whether the task can no longer
run (it becomes ``skipped`` or ``upstream_failed``), then whether it may run now.
A decision never waits for more than the rule needs: ``one_success`` runs on the
first success, ``all_success`` is upstream_failed on the first failure, and
``always`` runs at once, before its upstreams finish, as in Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from leoflow.domain.states import TaskState
from leoflow.domain.words import plural


class TriggerRule(StrEnum):
    ALL_SUCCESS = "all_success"
    ALL_DONE = "all_done"
    ALL_FAILED = "all_failed"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    ALWAYS = "always"


TRIGGER_RULES = tuple(rule.value for rule in TriggerRule)


class Decision(StrEnum):
    WAIT = "wait"
    RUN = "run"
    SKIP = "skip"
    UPSTREAM_FAILED = "upstream_failed"


@dataclass(frozen=True, slots=True)
class Counts:
    """How many direct upstreams are in each end state, and how many in all."""

    total: int
    success: int = 0
    skipped: int = 0
    failed: int = 0
    upstream_failed: int = 0

    @property
    def done(self) -> int:
        return self.success + self.skipped + self.failed + self.upstream_failed

    @property
    def unfinished(self) -> int:
        return self.total - self.done

    @classmethod
    def of(cls, states: Iterable[TaskState]) -> Counts:
        listed = list(states)
        return cls(
            total=len(listed),
            success=listed.count(TaskState.SUCCESS),
            skipped=listed.count(TaskState.SKIPPED),
            failed=listed.count(TaskState.FAILED),
            upstream_failed=listed.count(TaskState.UPSTREAM_FAILED),
        )


def decide(rule: TriggerRule, c: Counts) -> Decision:
    """What a task in ``none`` with this rule and these upstream counts does now."""
    if c.total == 0 or rule is TriggerRule.ALWAYS:
        return Decision.RUN
    all_done = c.unfinished == 0
    failures = c.failed + c.upstream_failed
    if rule is TriggerRule.ALL_SUCCESS:
        if failures:
            return Decision.UPSTREAM_FAILED
        if c.skipped:
            return Decision.SKIP
        return Decision.RUN if c.success == c.total else Decision.WAIT
    if rule is TriggerRule.ALL_FAILED:
        if c.success or c.skipped:
            return Decision.SKIP
        return Decision.RUN if failures == c.total else Decision.WAIT
    if rule is TriggerRule.ALL_DONE:
        return Decision.RUN if all_done else Decision.WAIT
    if rule is TriggerRule.ONE_SUCCESS:
        if c.success:
            return Decision.RUN
        if all_done:
            return Decision.SKIP if c.skipped == c.total else Decision.UPSTREAM_FAILED
        return Decision.WAIT
    if rule is TriggerRule.ONE_FAILED:
        if failures:
            return Decision.RUN
        return Decision.SKIP if all_done else Decision.WAIT
    # none_failed and none_failed_min_one_success
    if failures:
        return Decision.UPSTREAM_FAILED
    if rule is TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS and c.skipped == c.total:
        return Decision.SKIP
    return Decision.RUN if all_done else Decision.WAIT


_WAITING_FOR = {
    TriggerRule.ALL_SUCCESS: "all {n} to succeed",
    TriggerRule.ALL_FAILED: "all {n} to fail",
    TriggerRule.ALL_DONE: "all {n} to finish",
    TriggerRule.ONE_SUCCESS: "any of {n} to succeed",
    TriggerRule.ONE_FAILED: "any of {n} to fail",
    TriggerRule.NONE_FAILED: "all {n} to succeed or be skipped",
    TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS: (
        "all {n} to succeed or be skipped, at least one succeeding"
    ),
    TriggerRule.ALWAYS: "nothing",
}


def waiting_message(rule: TriggerRule, c: Counts) -> str:
    """Why a task with this rule still waits (the decision is ``wait``)."""
    need = _WAITING_FOR[rule].format(n=plural(c.total, "upstream"))
    return f"trigger rule {rule.value}: waiting for {need}; {c.unfinished} not finished"
