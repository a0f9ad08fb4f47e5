"""A tick's batch goes out as one UPDATE statement, each row changed written once,
not one per run of consecutive same-shape changes nor one per (depth, shape): a
tick's Starts and Completes interleave, and each statement is a round trip to the
database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from leoflow.domain.states import TaskState as T
from leoflow.store import Store, TaskChange

from .helpers import make_run


def count_updates(store: Store) -> list[str]:
    engine: Any = store._runner.engine
    sync = engine.sync_engine if hasattr(engine, "sync_engine") else engine
    seen: list[str] = []

    def before(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE TASK_INSTANCES"):
            seen.append(statement)

    sa.event.listen(sync, "before_cursor_execute", before)
    return seen


async def test_interleaved_shapes_are_grouped_and_rows_keep_their_order(store: Store) -> None:
    run = await make_run(store, tasks=12)
    tis = await store.list_task_instances(run_pk=run.pk)
    started, finishing, fresh = tis[:4], tis[4:8], tis[8:]
    setup = [TaskChange(t.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0}) for t in tis[:8]]
    setup += [TaskChange(t.pk, T.SCHEDULED, T.QUEUED, fields={"queued_at": 2.0}) for t in tis[:8]]
    setup += [TaskChange(t.pk, T.QUEUED, T.RUNNING, fields={"started_at": 3.0}) for t in finishing]
    assert all(await store.transition_tasks(setup, epoch=None))
    updates = count_updates(store)
    batch: list[TaskChange] = []
    for s, f in zip(started, finishing, strict=True):  # as a tick's events arrive
        batch.append(TaskChange(s.pk, T.QUEUED, T.RUNNING, fields={"started_at": 4.0}))
        batch.append(TaskChange(f.pk, T.RUNNING, T.SUCCESS, fields={"ended_at": 5.0}))
    for t in fresh:  # readiness, then admission, of the same rows in the same batch
        batch.append(TaskChange(t.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 6.0}))
    for t in fresh:
        batch.append(TaskChange(t.pk, T.SCHEDULED, T.QUEUED, fields={"queued_at": 7.0}))
    assert all(await store.transition_tasks(batch, epoch=None))
    # Started, finished, scheduled then queued: one statement. Before: 8 + 1 + 1, then
    # one per (depth, shape): 4.
    assert len(updates) == 1, updates
    states = {t.pk: t.state for t in await store.list_task_instances(run_pk=run.pk)}
    assert [states[t.pk] for t in started] == [T.RUNNING] * 4
    assert [states[t.pk] for t in finishing] == [T.SUCCESS] * 4
    assert [states[t.pk] for t in fresh] == [T.QUEUED] * 4


async def test_a_row_written_once_keeps_what_its_changes_did_not_set(store: Store) -> None:
    run = await make_run(store, tasks=4)
    fresh, finishing, wrong_state, wrong_try = await store.list_task_instances(run_pk=run.pk)
    setup = [
        TaskChange(t.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0})
        for t in (finishing, wrong_state, wrong_try)
    ]
    setup += [
        TaskChange(t.pk, T.SCHEDULED, T.QUEUED, fields={"queued_at": 2.0, "try_number": 1})
        for t in (finishing, wrong_try)
    ]
    setup.append(TaskChange(finishing.pk, T.QUEUED, T.RUNNING, fields={"started_at": 3.0}))
    assert all(await store.transition_tasks(setup, epoch=None))
    assert await store.heartbeat(finishing.pk, 1, 3.5)  # another writer's column
    updates = count_updates(store)
    batch = [
        TaskChange(fresh.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 6.0}),
        TaskChange(finishing.pk, T.RUNNING, T.SUCCESS, fields={"ended_at": 5.0, "output": "[1]"}),
        TaskChange(fresh.pk, T.SCHEDULED, T.QUEUED, fields={"queued_at": 7.0, "try_number": 1}),
        TaskChange(wrong_state.pk, T.QUEUED, T.RUNNING, fields={"started_at": 8.0}),
        TaskChange(wrong_try.pk, T.QUEUED, T.RUNNING, expected_try=2, fields={"started_at": 9.0}),
        TaskChange(fresh.pk, T.QUEUED, T.RUNNING, expected_try=1, fields={"started_at": 9.5}),
    ]
    assert await store.transition_tasks(batch, epoch=None) == [
        True, True, True, False, False, True,
    ]  # fmt: skip
    assert len(updates) == 2, updates  # the row with output in a shape of its own
    rows = {t.pk: t for t in await store.list_task_instances(run_pk=run.pk)}
    got = rows[fresh.pk]
    assert (got.state, got.try_number) == (T.RUNNING, 1)
    assert (got.ready_at, got.queued_at, got.started_at) == (6.0, 7.0, 9.5)
    got = rows[finishing.pk]
    assert (got.state, got.output, got.ended_at) == (T.SUCCESS, "[1]", 5.0)
    assert (got.ready_at, got.queued_at, got.started_at, got.heartbeat_at) == (1.0, 2.0, 3.0, 3.5)
    assert (rows[wrong_state.pk].state, rows[wrong_state.pk].started_at) == (T.SCHEDULED, None)
    assert (rows[wrong_try.pk].state, rows[wrong_try.pk].started_at) == (T.QUEUED, None)
