"""Retention beside the scheduling loop (LEOFLOW_RETENTION): old finished runs go in
small batches while tasks keep dispatching; a dry run deletes nothing; a run still
out, and each DAG's latest scheduled run, are never deleted."""

from __future__ import annotations

import asyncio
import time

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.retention import Retention
from leoflow.store import Store
from leoflow.store.schema import dag_runs, log_chunks, task_instances, tickets
from tests.integration.scheduler.conftest import SchedulerFactory, dag, run_to_end
from tests.integration.store.helpers import make_run

DAY = 86400.0
ONE_TASK = dag(
    """
dag_id: fresh
tasks:
  only: {command: "true"}
"""
)


async def seed_finished(store: Store, count: int, *, ended_at: float, tasks: int = 3) -> None:
    """``count`` finished runs of DAG ``old``, each with task instances and a log chunk."""

    def op(conn: Connection) -> None:
        conn.execute(
            sa.insert(dag_runs),
            [
                {
                    "dag_id": "old",
                    "run_id": f"r{i:06d}",
                    "state": "success",
                    "run_type": "manual",
                    "logical_date": None,
                    "conf": "{}",
                    "created_at": ended_at - 5,
                    "started_at": ended_at - 4,
                    "ended_at": ended_at,
                }
                for i in range(count)
            ],
        )
        run_pks = conn.execute(sa.select(dag_runs.c.pk).where(dag_runs.c.dag_id == "old"))
        conn.execute(
            sa.insert(task_instances),
            [
                {
                    "run_pk": pk,
                    "dag_id": "old",
                    "run_id": f"pk{pk}",
                    "task_id": f"t{t}",
                    "state": "success",
                    "try_number": 1,
                    "max_tries": 1,
                    "pool": "default_pool",
                    "pool_slots": 1,
                    "priority": 0,
                    "updated_at": ended_at,
                }
                for (pk,) in run_pks
                for t in range(tasks)
            ],
        )
        ti_pks = conn.execute(
            sa.select(task_instances.c.pk).where(task_instances.c.dag_id == "old")
        )
        conn.execute(
            sa.insert(log_chunks),
            [
                {"ti_pk": pk, "try_number": 1, "seq": 0, "start": 0, "size": 5, "data": b"line\n"}
                for (pk,) in ti_pks
            ],
        )

    await store._write(op, None)


async def table_sizes(store: Store) -> dict[str, int]:
    def op(conn: Connection) -> dict[str, int]:
        return {
            table.name: int(
                conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            )
            for table in (dag_runs, task_instances, log_chunks, tickets)
        }

    return await store._read(op)


async def test_a_task_dispatches_while_a_prune_of_many_rows_runs(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    await seed_finished(store, 2000, ended_at=time.time() - 3 * DAY)
    scheduler = await make_scheduler(ONE_TASK)
    await scheduler.start()
    batches = 0
    mid_prune = asyncio.Event()
    dispatched = asyncio.Event()

    async def between() -> None:
        nonlocal batches
        batches += 1
        if batches == 3:  # the prune is under way, and waits here until the task has run
            mid_prune.set()
            await dispatched.wait()

    prune = asyncio.create_task(store.prune(older_than=DAY, batch=50, between=between))
    await asyncio.wait_for(mid_prune.wait(), 60)
    row = await run_to_end(scheduler, "fresh")
    assert row.state is RunState.SUCCESS
    assert not prune.done() and batches == 3  # the run went through mid-prune
    assert (await table_sizes(store))["dag_runs"] == 2000 - 3 * 50 + 1
    dispatched.set()
    counts = await asyncio.wait_for(prune, 120)
    assert (counts.runs, counts.task_instances, counts.log_chunks) == (2000, 6000, 6000)
    assert counts.largest_batch <= 50
    assert [r.dag_id for r in await store.list_runs(limit=10)] == ["fresh"]


async def test_the_scheduler_applies_its_retention_setting(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    await seed_finished(store, 300, ended_at=time.time() - 3 * DAY)
    scheduler = await make_scheduler(ONE_TASK, retention=DAY)
    scheduler.retention.batch = 40
    await scheduler.start()
    row = await run_to_end(scheduler, "fresh")  # dispatches while retention prunes
    assert row.state is RunState.SUCCESS
    for _ in range(600):
        if scheduler.retention.passes:
            break
        await asyncio.sleep(0.05)
    assert scheduler.retention.total.runs == 300
    assert scheduler.retention.total.largest_batch <= 40
    sizes = await table_sizes(store)
    assert (sizes["dag_runs"], sizes["task_instances"]) == (1, 1)  # the fresh run's
    assert await store.get_run(row.pk) is not None


async def test_a_solo_scheduler_prunes_nothing(make_scheduler: SchedulerFactory) -> None:
    scheduler = await make_scheduler(ONE_TASK, retention=DAY, solo=True)
    assert scheduler.retention.older_than is None  # `leoflow run` beside a scheduler


async def test_a_dry_run_deletes_nothing(store: Store) -> None:
    await seed_finished(store, 120, ended_at=time.time() - 3 * DAY)
    before = await table_sizes(store)
    dry = await store.prune(older_than=DAY, batch=25, dry_run=True)
    assert await table_sizes(store) == before
    assert (dry.runs, dry.task_instances, dry.log_chunks) == (120, 360, 360)
    done = await store.prune(older_than=DAY, batch=25)
    assert (done.runs, done.task_instances, done.log_chunks) == (120, 360, 360)
    assert await table_sizes(store) == {
        "dag_runs": 0,
        "task_instances": 0,
        "log_chunks": 0,
        "tickets": 0,
    }


async def test_retention_never_deletes_a_running_runs_rows(store: Store) -> None:
    long_ago = time.time() - 30 * DAY
    running = await make_run(store, dag_id="a", run_id="running", tasks=2)
    assert await store.transition_run(
        running.pk, RunState.QUEUED, RunState.RUNNING, epoch=None, started_at=long_ago
    )
    # A failed run whose try is still out (the run ended, its task has not yet).
    straggler = await make_run(store, dag_id="a", run_id="straggler", tasks=1)
    (ti,) = await store.list_task_instances(run_pk=straggler.pk)
    for old, new in (
        (TaskState.NONE, TaskState.SCHEDULED),
        (TaskState.SCHEDULED, TaskState.QUEUED),
        (TaskState.QUEUED, TaskState.RUNNING),
    ):
        assert await store.transition_task(ti.pk, old, new, epoch=None)
    assert await store.transition_run(straggler.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_run(
        straggler.pk, RunState.RUNNING, RunState.FAILED, epoch=None, ended_at=long_ago
    )
    # Two old scheduled runs: the latest stays (cron counts on from it), the other goes.
    for run_id, logical_date in (("s1", long_ago - 2 * DAY), ("s2", long_ago - DAY)):
        row = await make_run(
            store, dag_id="cron", run_id=run_id, run_type="scheduled", logical_date=logical_date
        )
        assert await store.transition_run(row.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
        assert await store.transition_run(
            row.pk, RunState.RUNNING, RunState.SUCCESS, epoch=None, ended_at=long_ago
        )
    for pk in (running.pk, straggler.pk):
        for t in await store.list_task_instances(run_pk=pk):
            await store.append_log(t.pk, 1, b"still here\n")

    retention = Retention(store, DAY, pause=0.0)
    counts = await retention.prune_once()
    assert counts.runs == 1
    assert {(r.dag_id, r.run_id) for r in await store.list_runs(limit=10)} == {
        ("a", "running"),
        ("a", "straggler"),
        ("cron", "s2"),
    }
    assert (await store.last_scheduled_run("cron")).run_id == "s2"  # type: ignore[union-attr]
    for pk in (running.pk, straggler.pk):
        for t in await store.list_task_instances(run_pk=pk):
            assert await store.read_log(t.pk, 1) == b"still here\n"
    assert len(await store.list_task_instances(run_pk=running.pk)) == 2
