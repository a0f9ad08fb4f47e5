"""Each try of a task instance is kept when the row moves past it: the next try begins
(in a batch, as the scheduler commits, or alone) or a clear resets the row. On SQLite
and PostgreSQL."""

from __future__ import annotations

import time

from leoflow.domain.clearing import cleared_fields
from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store, TaskChange

from .helpers import make_run

S = TaskState


async def _try(store: Store, pk: int, number: int, end: TaskState, **fields: object) -> None:
    """Queue try ``number`` (from scheduled), start it and end it in ``end``."""
    at = 10.0 * number
    queued = {"try_number": number, "queued_at": at}
    started = {"started_at": at + 1, "executor_ref": f"proc:h:{number}"}
    changes = [
        TaskChange(pk, S.SCHEDULED, S.QUEUED, None, queued),
        TaskChange(pk, S.QUEUED, S.RUNNING, None, started),
        TaskChange(pk, S.RUNNING, end, None, {"ended_at": at + 2, **fields}),
    ]
    assert await store.transition_tasks(changes, epoch=None) == [True, True, True]


async def test_a_retry_keeps_the_try_it_leaves(store: Store) -> None:
    run = await make_run(store, tasks=2)
    pk, other = [t.pk for t in await store.list_task_instances(run_pk=run.pk)]
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    await _try(store, pk, 1, S.UP_FOR_RETRY, exit_code=3, reason="exit_code", message="m1")
    assert await store.list_tries(pk) == [], "try 1 is the row itself until try 2 begins"
    assert await store.transition_task(pk, S.UP_FOR_RETRY, S.SCHEDULED, epoch=None)
    await _try(store, pk, 2, S.SUCCESS, exit_code=0, reason="success", message=None)
    (kept,) = await store.list_tries(pk)
    assert (kept.try_number, kept.state, kept.exit_code, kept.reason, kept.message) == (
        1, "up_for_retry", 3, "exit_code", "m1"
    )  # fmt: skip
    assert (kept.queued_at, kept.started_at, kept.ended_at) == (10.0, 11.0, 12.0)
    assert kept.executor_ref == "proc:h:1"
    row = await store.get_task_instance(pk)
    assert row is not None and (row.try_number, row.started_at) == (2, 21.0)
    assert await store.list_tries(other) == [], "a task never retried keeps nothing"


async def test_a_clear_keeps_the_finished_try_and_the_requeue_keeps_it_as_it_was(
    store: Store,
) -> None:
    run = await make_run(store, tasks=1)
    (pk,) = [t.pk for t in await store.list_task_instances(run_pk=run.pk)]
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    await _try(store, pk, 1, S.FAILED, exit_code=1, reason="exit_code", message="boom")
    fields = cleared_fields(1, 0, "cleared by test")
    assert await store.transition_task(pk, S.FAILED, S.NONE, epoch=None, **fields)
    (kept,) = await store.list_tries(pk)
    assert (kept.try_number, kept.state, kept.message, kept.started_at) == (
        1,
        "failed",
        "boom",
        11.0,
    )
    # The row's facts are gone now; the next try must not overwrite what was kept.
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    await _try(store, pk, 2, S.SUCCESS, reason="success")
    assert [(t.try_number, t.state, t.message) for t in await store.list_tries(pk)] == [
        (1, "failed", "boom")
    ]


async def test_a_lost_compare_and_set_keeps_nothing(store: Store) -> None:
    run = await make_run(store, tasks=1)
    (pk,) = [t.pk for t in await store.list_task_instances(run_pk=run.pk)]
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    await _try(store, pk, 1, S.UP_FOR_RETRY, reason="exit_code")
    # Expecting the wrong state: the change loses, and so does the try it would keep.
    assert not await store.transition_task(pk, S.SCHEDULED, S.QUEUED, epoch=None, try_number=2)
    assert await store.list_tries(pk) == []
    results = await store.transition_tasks(
        [TaskChange(pk, S.SCHEDULED, S.QUEUED, None, {"try_number": 2})], epoch=None
    )
    assert results == [False] and await store.list_tries(pk) == []


async def test_pruning_a_run_removes_its_tries(store: Store) -> None:
    run = await make_run(store, tasks=1)
    (pk,) = [t.pk for t in await store.list_task_instances(run_pk=run.pk)]
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    await _try(store, pk, 1, S.UP_FOR_RETRY, reason="exit_code")
    assert await store.transition_task(pk, S.UP_FOR_RETRY, S.SCHEDULED, epoch=None)
    await _try(store, pk, 2, S.FAILED, reason="exit_code")
    assert len(await store.list_tries(pk)) == 1
    assert await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_run(
        run.pk, RunState.RUNNING, RunState.FAILED, epoch=None, ended_at=time.time()
    )
    counts = await store.prune(older_than=60, now=time.time() + 3600)
    assert counts.runs == 1
    assert await store.list_tries(pk) == []
