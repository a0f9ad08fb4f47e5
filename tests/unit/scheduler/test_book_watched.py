"""The deadline watch walks only the runs whose DAG sets a deadline or run_timeout:
the book keeps exactly those apart, through adopt, re-adopt and forget."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.admission import Admission
from leoflow.domain.states import RunState
from leoflow.scheduler.book import Book
from leoflow.store.rows import RunRow

PLAIN = parse_dag("dag_id: d\ntasks: {a: {command: 'true'}}\n", Path("d.yaml"))
DEADLINE = parse_dag("dag_id: d\ndeadline: 1h\ntasks: {a: {command: 'true'}}\n", Path("d.yaml"))
TIMEOUT = parse_dag("dag_id: d\nrun_timeout: 5m\ntasks: {a: {command: 'true'}}\n", Path("d.yaml"))


def _row(pk: int) -> RunRow:
    return RunRow(pk, "d", f"r{pk}", RunState.RUNNING, "manual", None, {}, 1.0, 1.0, None, None)


def test_only_runs_with_a_limit_are_watched() -> None:
    book = Book(Admission(8, {}))
    book.adopt(_row(1), PLAIN, [])
    book.adopt(_row(2), DEADLINE, [])
    book.adopt(_row(3), TIMEOUT, [])
    assert sorted(book.watched) == [2, 3]
    assert book.watched[2] is book.runs[2]


def test_a_re_adopted_run_follows_its_new_spec_and_a_forgotten_one_goes() -> None:
    book = Book(Admission(8, {}))
    book.adopt(_row(1), DEADLINE, [])
    fresh = book.adopt(_row(1), DEADLINE, [])
    assert book.watched[1] is fresh
    book.adopt(_row(1), PLAIN, [])
    assert book.watched == {}
    book.adopt(_row(2), TIMEOUT, [])
    book.forget(book.runs[2])
    assert book.watched == {}
