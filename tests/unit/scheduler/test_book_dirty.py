"""A tick visits only the runs that changed: every way a run turns dirty notes it in
the book, and nothing else is handed to the tick."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.admission import Admission
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.scheduler.mirror import TaskMirror
from leoflow.store.rows import RunRow

SPEC = parse_dag("dag_id: d\ntasks: {a: {command: 'true'}}\n", Path("d.yaml"))


def _row(pk: int) -> RunRow:
    return RunRow(pk, "d", f"r{pk}", RunState.RUNNING, "manual", None, {}, 1.0, 1.0, None, None)


def _book(runs: int) -> Book:
    book = Book(Admission(8, {}))
    for pk in range(1, runs + 1):
        book.adopt(_row(pk), SPEC, [])
    return book


def test_an_adopted_run_is_dirty_once_and_a_clean_run_is_never_taken() -> None:
    book = _book(3)
    assert sorted(r.pk for r in book.take_dirty()) == [1, 2, 3]
    for run in book.runs.values():
        run.dirty = False
    assert book.take_dirty() == []
    book.runs[2].dirty = True
    book.runs[2].dirty = True
    assert [r.pk for r in book.take_dirty()] == [2]
    assert book.take_dirty() == []


def test_a_run_cleaned_or_forgotten_after_it_turned_dirty_is_not_taken() -> None:
    book = _book(3)
    book.take_dirty()
    book.runs[1].dirty = True
    book.runs[1].dirty = False
    book.runs[3].dirty = True
    book.forget(book.runs[3])
    assert book.take_dirty() == []


def test_a_replaced_mirror_is_taken_and_not_the_one_it_replaced() -> None:
    book = _book(1)
    book.take_dirty()
    old = book.runs[1]
    old.dirty = True
    fresh = book.adopt(_row(1), SPEC, [])
    old.dirty = True  # a stale mirror's flag must not bring it back
    assert book.take_dirty() == [fresh]


def test_changed_runs_are_the_advanced_ones_and_those_of_moved_task_instances() -> None:
    book = _book(3)
    book.take_dirty()
    batch = Batch()
    batch.touched.append(TaskMirror(30, 3, "a", TaskState.QUEUED, 1, 1, "default_pool", 1, 0))
    assert [r.pk for r in book.changed_runs([book.runs[1]], batch)] == [1, 3]
