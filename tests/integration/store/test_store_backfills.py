"""Backfill records on SQLite and PostgreSQL: whole or nothing, progress, cancel."""

from __future__ import annotations

import pytest

from leoflow.domain.states import RunState
from leoflow.store import Store
from leoflow.store.backfills import (
    BackfillConflict,
    backfill_progress,
    backfill_runs,
    cancel_backfill,
    create_backfill,
    finish_backfill,
    get_backfill,
    link_run,
    list_backfills,
    pending_points,
    runs_in_range,
)
from leoflow.store.retention import prune
from leoflow.store.rows import TaskSeed

SEED = [TaskSeed("t", "default_pool", 1, 0, 1)]


async def _new(store: Store, points: list[float]) -> int:
    row = await create_backfill(
        store,
        dag_id="d",
        range_start=points[0],
        range_end=points[-1],
        points=points,
        reprocess_failed=False,
        max_active_runs=2,
        created_by="ops",
    )
    return row.pk


async def _run(store: Store, run_id: str, logical_date: float) -> int:
    row = await store.create_run(
        "d", run_id, run_type="backfill", logical_date=logical_date, conf={}, tasks=SEED,
        epoch=None,
    )  # fmt: skip
    return row.pk


async def test_points_runs_and_progress(store: Store) -> None:
    pk = await _new(store, [30.0, 10.0, 20.0])
    fetched = await get_backfill(store, pk)
    assert fetched is not None and fetched.state == "running" and fetched.max_active_runs == 2
    assert await pending_points(store, pk, 2) == [10.0, 20.0]
    first = await _run(store, "b10", 10.0)
    assert await link_run(store, pk, 10.0, first, epoch=None)
    progress = await backfill_progress(store, pk)
    assert (progress.total, progress.pending, progress.queued) == (3, 2, 1)
    assert await pending_points(store, pk, 5) == [20.0, 30.0]
    assert await backfill_runs(store, pk) == [(10.0, first), (20.0, None), (30.0, None)]
    assert await runs_in_range(store, "d", 0.0, 15.0) == {10.0: [RunState.QUEUED]}


async def test_a_second_running_backfill_of_the_dag_is_refused_and_writes_nothing(
    store: Store,
) -> None:
    pk = await _new(store, [1.0])
    with pytest.raises(BackfillConflict, match=str(pk)):
        await _new(store, [2.0, 3.0])
    assert [b.pk for b in await list_backfills(store, dag_id="d")] == [pk]
    assert await finish_backfill(store, pk, "success", "1 ok", epoch=None)
    assert not await finish_backfill(store, pk, "failed", None, epoch=None)
    assert await _new(store, [2.0]) != pk


async def test_cancel_fails_live_runs_only_and_stops_linking(store: Store) -> None:
    pk = await _new(store, [1.0, 2.0, 3.0])
    live = await _run(store, "b1", 1.0)
    done = await _run(store, "b2", 2.0)
    for run_pk in (live, done):
        assert await link_run(store, pk, float(run_pk == done) + 1.0, run_pk, epoch=None)
    assert await store.transition_run(done, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_run(done, RunState.RUNNING, RunState.SUCCESS, epoch=None)
    assert await cancel_backfill(store, pk, "ops") == 1
    assert await cancel_backfill(store, pk, "ops") is None
    live_row, done_row = await store.get_run(live), await store.get_run(done)
    assert live_row is not None and live_row.state is RunState.FAILED
    assert live_row.message == f"cancelled with backfill {pk} by ops"
    assert done_row is not None and done_row.state is RunState.SUCCESS
    late = await _run(store, "b3", 3.0)
    assert not await link_run(store, pk, 3.0, late, epoch=None)
    late_row = await store.get_run(late)
    assert late_row is not None and late_row.state is RunState.FAILED
    row = await get_backfill(store, pk)
    assert row is not None and row.state == "cancelled" and row.ended_at is not None


async def test_a_pruned_run_counts_as_neither_pending_nor_live(store: Store) -> None:
    pk = await _new(store, [1.0, 2.0])
    run_pk = await _run(store, "b1", 1.0)
    assert await link_run(store, pk, 1.0, run_pk, epoch=None)
    assert await store.transition_run(
        run_pk, RunState.QUEUED, RunState.FAILED, epoch=None, ended_at=1.0
    )

    await prune(store, older_than=-60.0, dag_id="d", dry_run=False, batch=10)
    assert await store.get_run(run_pk) is None
    progress = await backfill_progress(store, pk)
    assert (progress.total, progress.pending, progress.active, progress.done) == (2, 1, 0, 0)
