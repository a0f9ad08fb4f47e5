"""A success's asset events are written in the success's own transaction, on both
ways a success is recorded (the scheduler's batch and an agent's outcome written by a
replica), once per try and asset, and not at all when the compare-and-set loses."""

from __future__ import annotations

from leoflow.domain.states import TaskState
from leoflow.store import Store
from leoflow.store.asset_events import TaskAssetEvent
from leoflow.store.rows import TaskChange
from tests.integration.store.helpers import make_run


def _event(ti_pk: int, uri: str) -> TaskAssetEvent:
    return TaskAssetEvent(ti_pk, 1, "dag", "run", "t0000", uri, '{"rows":1}')


async def _running(store: Store, ti_pk: int) -> None:
    for old, new in [
        (TaskState.NONE, TaskState.SCHEDULED),
        (TaskState.SCHEDULED, TaskState.QUEUED),
        (TaskState.QUEUED, TaskState.RUNNING),
    ]:
        fields = {"try_number": 1} if new is TaskState.QUEUED else {}
        assert await store.transition_task(ti_pk, old, new, epoch=None, **fields)


async def test_a_replica_s_success_records_its_events_once_and_a_lost_one_none(
    store: Store,
) -> None:
    run = await make_run(store, tasks=2)
    first, second = await store.list_task_instances(run_pk=run.pk)
    await _running(store, first.pk)
    success = TaskChange(first.pk, TaskState.RUNNING, TaskState.SUCCESS, 1, {})
    events = [_event(first.pk, "a"), _event(first.pk, "b")]
    assert await store.transition_task_with_events(success, events, epoch=None)
    # The same outcome again (a resent Complete) loses its compare-and-set: nothing more.
    assert not await store.transition_task_with_events(success, events, epoch=None)
    recorded = await store.list_asset_events()
    assert sorted((e.uri, e.task_id, e.try_number, e.extra) for e in recorded) == [
        ("a", "t0000", 1, {"rows": 1}),
        ("b", "t0000", 1, {"rows": 1}),
    ]
    # A failure records none of the events it was handed.
    await _running(store, second.pk)
    failed = TaskChange(second.pk, TaskState.RUNNING, TaskState.FAILED, 1, {})
    assert await store.transition_task_with_events(failed, [_event(second.pk, "c")], epoch=None)
    assert len(await store.list_asset_events()) == 2


async def test_the_batch_records_events_only_for_the_changes_that_won(store: Store) -> None:
    run = await make_run(store, tasks=2)
    first, second = await store.list_task_instances(run_pk=run.pk)
    for ti in (first, second):
        await _running(store, ti.pk)
    won = TaskChange(first.pk, TaskState.RUNNING, TaskState.SUCCESS, 1, {})
    lost = TaskChange(second.pk, TaskState.QUEUED, TaskState.SUCCESS, 1, {})  # it is running
    results, _ = await store.commit_batch(
        [won, lost],
        [],
        epoch=None,
        asset_events=[_event(first.pk, "a"), _event(second.pk, "b")],
    )
    assert results == [True, False]
    assert [e.uri for e in await store.list_asset_events()] == ["a"]
