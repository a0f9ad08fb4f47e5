"""Backfill reads for pages and the API on SQLite and PostgreSQL: points with their
runs in one join, paged; many backfills' progress in one grouped statement."""

from __future__ import annotations

from leoflow.domain.states import RunState
from leoflow.store import Store
from leoflow.store.backfill_pages import backfill_points_with_runs, progress_of, progress_of_points
from leoflow.store.backfills import backfill_progress, finish_backfill, link_run
from tests.integration.store.test_store_backfills import _new, _run


async def test_points_with_runs_and_progress_of_many(store: Store) -> None:
    first = await _new(store, [10.0, 20.0, 30.0, 40.0])
    queued = await _run(store, "b10", 10.0)
    ended = await _run(store, "b20", 20.0)
    assert await store.transition_run(ended, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_run(ended, RunState.RUNNING, RunState.FAILED, epoch=None)
    for date, run_pk in ((10.0, queued), (20.0, ended)):
        assert await link_run(store, first, date, run_pk, epoch=None)
    points = await backfill_points_with_runs(store, first)
    assert [(p.logical_date, p.run.run_id if p.run else None, p.made) for p in points] == [
        (10.0, "b10", True), (20.0, "b20", True), (30.0, None, False), (40.0, None, False),
    ]  # fmt: skip
    assert points[1].run is not None and points[1].run.state is RunState.FAILED
    page = await backfill_points_with_runs(store, first, after=10.0, limit=2)
    assert [p.logical_date for p in page] == [20.0, 30.0]
    assert await finish_backfill(store, first, "failed", None, epoch=None)
    second = await _new(store, [5.0])
    many = await progress_of(store, [first, second, 999])
    # The grouped count agrees with the one-backfill count and with the joined rows.
    assert many[first] == await backfill_progress(store, first) == progress_of_points(points)
    assert (many[first].total, many[first].pending, many[first].queued) == (4, 2, 1)
    assert many[first].failed == 1 and many[first].done == 1
    assert (many[second].total, many[second].pending) == (1, 1)
    assert many[999].total == 0
    assert await progress_of(store, []) == {}
