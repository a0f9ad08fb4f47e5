"""start_runs need not walk every run each tick: the book keeps its queued runs
apart, through adopt, re-adopt, state changes and forget."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.admission import Admission
from leoflow.domain.states import RunState
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.store.rows import RunRow

PLAIN = parse_dag("dag_id: d\ntasks: {a: {command: 'true'}}\n", Path("d.yaml"))


def _row(pk: int, state: RunState = RunState.RUNNING) -> RunRow:
    return RunRow(pk, "d", f"r{pk}", state, "manual", None, {}, 1.0, 1.0, None, None)


def test_queued_runs_are_kept_apart_until_they_start_or_go() -> None:
    book = Book(Admission(8, {}))
    book.adopt(_row(1, RunState.QUEUED), PLAIN, [])
    book.adopt(_row(2, RunState.QUEUED), PLAIN, [])
    book.adopt(_row(3), PLAIN, [])
    assert sorted(book.queued) == [1, 2]
    book.set_run_state(book.runs[1], RunState.RUNNING, Batch())
    assert sorted(book.queued) == [2]
    book.forget(book.runs[2])
    assert book.queued == {}
    book.adopt(_row(3, RunState.QUEUED), PLAIN, [])  # cleared: queued again
    assert book.queued == {3: book.runs[3]}
    book.adopt(_row(3), PLAIN, [])
    assert book.queued == {}


def test_a_stale_mirror_changing_state_leaves_the_queued_runs_alone() -> None:
    book = Book(Admission(8, {}))
    stale = book.adopt(_row(1), PLAIN, [])
    book.adopt(_row(1), PLAIN, [])
    book.set_run_state(stale, RunState.QUEUED, Batch())
    assert book.queued == {}
