"""A store with one of everything the endpoints act on."""

from __future__ import annotations

from typing import Any

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import put_dag

SEEDS = [
    TaskSeed("extract", "default_pool", 1, 0, 1),
    TaskSeed("transform", "warehouse", 1, 0, 3),
    TaskSeed("load", "default_pool", 1, 0, 1),
]


async def move(store: Store, ti_pk: int, *states: TaskState, **fields: Any) -> None:
    current = (await store.get_task_instance(ti_pk)).state  # type: ignore[union-attr]
    for new in states:
        extra = fields if new is states[-1] else {}
        if new is TaskState.QUEUED:
            ti = await store.get_task_instance(ti_pk)
            assert ti is not None
            extra = {"try_number": ti.try_number + 1, **extra}
        assert await store.transition_task(ti_pk, current, new, epoch=None, **extra), new
        current = new


async def seed(store: Store) -> None:
    """DAG etl; run r finished (extract success with a log, transform failed, load
    upstream_failed); run q queued; pool gpu."""
    await put_dag(store)
    run = await store.create_run(
        "etl", "r", run_type="manual", logical_date=None, conf={}, tasks=SEEDS, epoch=None
    )
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    path = (TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
    await move(store, tis["extract"].pk, *path, TaskState.SUCCESS)
    await store.append_log(tis["extract"].pk, 1, b"hello\nworld\n")
    await move(store, tis["transform"].pk, *path, TaskState.FAILED)
    await move(store, tis["load"].pk, TaskState.UPSTREAM_FAILED)
    await store.transition_run(run.pk, RunState.RUNNING, RunState.FAILED, epoch=None)
    await store.create_run(
        "etl", "q", run_type="manual", logical_date=None, conf={}, tasks=SEEDS, epoch=None
    )
    await store.upsert_pool("gpu", 2)


async def snapshot(store: Store) -> Any:
    """Everything an endpoint could change, comparable with ==."""
    return (
        [(d.dag_id, d.paused, d.active, d.spec_hash) for d in await store.list_dags()],
        [(r.pk, r.run_id, r.state, r.message, r.ended_at) for r in await store.list_runs()],
        [(t.pk, t.state, t.try_number, t.max_tries) for t in await store.list_task_instances()],
        [(p.name, p.slots, p.description) for p in await store.list_pools()],
    )


async def seed_with_a_running_try(store: Store) -> None:
    """``seed``, and run q's extract running its first try (a log to follow)."""
    await seed(store)
    run = await store.find_run("etl", "q")
    assert run is not None
    ti = next(t for t in await store.list_task_instances(run_pk=run.pk) if t.task_id == "extract")
    await move(store, ti.pk, TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
