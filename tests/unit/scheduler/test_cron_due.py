"""CronDue: a poll looks only at the DAGs whose fire time has come, and at every
DAG again after a spec change, a pause change or an interrupted poll."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.dag import DagSpec
from leoflow.scheduler.cron_due import CronDue


def _dag(dag_id: str, schedule: str | None = "* * * * *") -> DagSpec:
    line = f"schedule: '{schedule}'\n" if schedule else ""
    return parse_dag(f"dag_id: {dag_id}\n{line}tasks: {{a: {{command: 'true'}}}}\n", Path("t.yaml"))


def _ids(picked: list[tuple[str, DagSpec]]) -> list[str]:
    return [dag_id for dag_id, _ in picked]


DAGS = {"a": _dag("a"), "b": _dag("b"), "c": _dag("c"), "manual": _dag("manual", None)}


def test_the_first_look_is_at_every_scheduled_unpaused_dag_then_only_at_the_due_ones() -> None:
    due = CronDue()
    paused: set[str] = {"c"}
    assert _ids(due.to_check(0.0, DAGS, paused)) == ["a", "b"]
    due.set("a", 100.0)
    due.set("b", 200.0)
    assert due.to_check(99.0, DAGS, paused) == []
    assert _ids(due.to_check(150.0, DAGS, paused)) == ["a"]
    # Taken off the heap: not again until set() puts a new time there.
    assert due.to_check(160.0, DAGS, paused) == []
    due.set("a", 160.0)
    assert _ids(due.to_check(250.0, DAGS, paused)) == ["a", "b"]


def test_a_superseded_fire_time_does_not_pick_the_dag() -> None:
    due = CronDue()
    due.to_check(0.0, DAGS, set())
    due.set("a", 100.0)
    due.set("a", 300.0)  # e.g. the run was made and the next fire worked out
    assert due.to_check(200.0, DAGS, set()) == []
    assert _ids(due.to_check(300.0, DAGS, set())) == ["a"]


def test_a_new_spec_an_unpause_or_an_interrupted_poll_look_at_everything_again() -> None:
    due = CronDue()
    paused = {"b"}
    dags = {"a": DAGS["a"], "b": DAGS["b"]}
    due.to_check(0.0, dags, paused)
    due.set("a", 100.0)
    due.set("b", 100.0)
    assert _ids(due.to_check(100.0, dags, paused)) == ["a"]  # b is paused when it is due
    assert _ids(due.to_check(101.0, dags, set())) == ["a", "b"]  # unpaused: every DAG
    due.set("a", 500.0)
    due.set("b", 500.0)
    assert due.to_check(101.0, dags, set()) == []
    due.forget("b")
    assert _ids(due.to_check(102.0, dags, set())) == ["a", "b"]
    assert due.to_check(103.0, dags, set()) == []
    due.interrupted()
    assert _ids(due.to_check(104.0, dags, set())) == ["a", "b"]


def test_a_dag_that_is_gone_or_lost_its_schedule_is_not_picked() -> None:
    due = CronDue()
    due.to_check(0.0, DAGS, set())
    due.set("a", 10.0)
    due.set("b", 10.0)
    left = {"b": _dag("b", None)}
    assert due.to_check(20.0, left, set()) == []
