"""A tick's batch goes out as one UPDATE per (level, shape), not one per run of
consecutive same-shape changes: a tick's Starts and Completes interleave, and each
statement is a round trip to the database."""

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
    # started, finished, scheduled at level 0; queued at level 1. Before: 8 + 1 + 1.
    assert len(updates) == 4, updates
    states = {t.pk: t.state for t in await store.list_task_instances(run_pk=run.pk)}
    assert [states[t.pk] for t in started] == [T.RUNNING] * 4
    assert [states[t.pk] for t in finishing] == [T.SUCCESS] * 4
    assert [states[t.pk] for t in fresh] == [T.QUEUED] * 4
