"""The deadline watch is handed only the runs whose deadline or run_timeout has come:
each run the book takes in or starts is noted, and nothing else is looked at."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.admission import Admission
from leoflow.domain.states import RunState
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.scheduler.deadline_due import DeadlineDue
from leoflow.store.rows import RunRow

TASKS = "tasks: {a: {command: 'true'}}\n"
PLAIN = parse_dag(f"dag_id: plain\n{TASKS}", Path("p.yaml"))
LATE = parse_dag(f"dag_id: late\ndeadline: 100s\n{TASKS}", Path("l.yaml"))
SLOW = parse_dag(f"dag_id: slow\nrun_timeout: 50s\n{TASKS}", Path("s.yaml"))


def _row(pk: int, dag_id: str, state: RunState, started: float | None = None) -> RunRow:
    return RunRow(pk, dag_id, f"r{pk}", state, "manual", None, {}, 1000.0, started, None, None)


def _noted(book: Book, due: DeadlineDue) -> None:
    for run in book.entered:
        due.note(run)
    book.entered.clear()


def test_only_runs_whose_time_came_are_taken_and_plain_dags_never() -> None:
    book, due = Book(Admission(8, {})), DeadlineDue()
    for pk in range(1, 501):
        book.adopt(_row(pk, "plain", RunState.RUNNING, 1000.0), PLAIN, [])
    book.adopt(_row(900, "late", RunState.RUNNING, 1000.0), LATE, [])
    _noted(book, due)
    assert due.take_due(1099.0, book.runs) == []
    assert [r.pk for r in due.take_due(1100.0, book.runs)] == [900]
    assert due.take_due(5000.0, book.runs) == []  # taken once; noted again only if pending


def test_a_run_timeout_counts_once_the_run_starts() -> None:
    book, due = Book(Admission(8, {})), DeadlineDue()
    run = book.adopt(_row(1, "slow", RunState.QUEUED), SLOW, [])
    _noted(book, due)
    assert due.take_due(10_000.0, book.runs) == []  # queued: no run_timeout yet
    run.started_at = 2000.0
    book.set_run_state(run, RunState.RUNNING, Batch(), started_at=2000.0)
    _noted(book, due)
    assert due.take_due(2049.0, book.runs) == []
    assert due.take_due(2050.0, book.runs) == [run]


def test_a_reloaded_run_is_taken_as_the_book_holds_it_and_a_forgotten_one_never() -> None:
    book, due = Book(Admission(8, {})), DeadlineDue()
    old = book.adopt(_row(1, "late", RunState.RUNNING, 1000.0), LATE, [])
    gone = book.adopt(_row(2, "late", RunState.RUNNING, 1000.0), LATE, [])
    _noted(book, due)
    new = book.adopt(_row(1, "late", RunState.RUNNING, 1000.0), LATE, [])  # a reload
    book.forget(gone)
    _noted(book, due)
    taken = due.take_due(1100.0, book.runs)
    assert taken == [new] and taken[0] is not old
