from __future__ import annotations

import pytest
import sqlalchemy as sa

from leoflow.domain.states import RunState, TaskState
from leoflow.store import StaleEpoch, Store, TaskChange

from .helpers import make_run

T = TaskState


async def test_take_office_bumps_the_epoch(store: Store) -> None:
    assert await store.current_epoch() == 0
    assert await store.take_office("scheduler-a") == 1
    assert await store.take_office("scheduler-b") == 2
    assert await store.current_epoch() == 2


async def test_stale_epoch_refused_nothing_written(store_url: str, store: Store) -> None:
    old = await store.take_office("scheduler-a")
    run = await make_run(store, tasks=3, epoch=old)
    tis = await store.list_task_instances(run_pk=run.pk)

    # A second scheduler (its own connections) takes office.
    successor = await Store.open(store_url)
    try:
        new = await successor.take_office("scheduler-b")
    finally:
        await successor.close()
    assert new == old + 1

    with pytest.raises(StaleEpoch) as info:
        await store.transition_task(tis[0].pk, T.NONE, T.SCHEDULED, epoch=old, ready_at=1.0)
    assert (info.value.expected, info.value.current) == (old, new)
    with pytest.raises(StaleEpoch):
        await store.transition_tasks(
            [TaskChange(ti.pk, T.NONE, T.SCHEDULED) for ti in tis], epoch=old
        )
    with pytest.raises(StaleEpoch):
        await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=old)
    with pytest.raises(StaleEpoch):
        await make_run(store, run_id="second", tasks=2, epoch=old)

    assert await store.list_task_instances(run_pk=run.pk) == tis
    assert await store.get_run(run.pk) == run
    assert await store.find_run("dag", "second") is None

    # The current epoch, and unfenced writes, still go through.
    assert await store.transition_task(tis[0].pk, T.NONE, T.SCHEDULED, epoch=new)
    assert await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_tasks([TaskChange(tis[1].pk, T.NONE, T.SKIPPED)], epoch=new)


async def test_a_batch_is_fenced_with_its_lock_or_alone(store_url: str, store: Store) -> None:
    # The fence rides on the batch's row lock; a batch whose lock finds no row (only
    # tickets, or rows gone) is fenced on its own, and refused all the same.
    old = await store.take_office("scheduler-a")
    run = await make_run(store, tasks=2, epoch=old)
    tis = await store.list_task_instances(run_pk=run.pk)
    statements: list[str] = []
    engine = store._runner.engine
    sync = getattr(engine, "sync_engine", engine)

    def before(_c: object, _cur: object, statement: str, *_: object) -> None:
        if not statement.startswith("BEGIN"):  # SQLite's BEGIN IMMEDIATE
            statements.append(" ".join(statement.split()))

    sa.event.listen(sync, "before_cursor_execute", before)
    assert await store.transition_tasks(
        [TaskChange(tis[0].pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0})], epoch=old
    ) == [True]
    assert len(statements) == 2, statements  # the lock (with the epoch), the update
    successor = await Store.open(store_url)
    try:
        new = await successor.take_office("scheduler-b")
    finally:
        await successor.close()
    with pytest.raises(StaleEpoch) as info:
        await store.transition_tasks([TaskChange(tis[1].pk, T.NONE, T.SCHEDULED)], epoch=old)
    assert (info.value.expected, info.value.current) == (old, new)
    with pytest.raises(StaleEpoch):
        await store.transition_tasks([], epoch=old, tickets=[("h", tis[1].pk, 1)])
    with pytest.raises(StaleEpoch):
        await store.transition_tasks([TaskChange(10**9, T.NONE, T.SCHEDULED)], epoch=old)
    assert (await store.list_task_instances(run_pk=run.pk))[1] == tis[1]
    assert await store.transition_tasks([], epoch=new, tickets=[("h", tis[1].pk, 1)]) == []
