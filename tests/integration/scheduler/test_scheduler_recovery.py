"""A scheduler that dies mid-run loses nothing, and a deposed one writes nothing."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from leoflow.domain.states import RunState, TaskState
from leoflow.executor.subprocess import SubprocessExecutor
from leoflow.scheduler import metrics
from leoflow.scheduler.core import LeadershipLost, Scheduler, SchedulerConfig
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag

CHAIN = """
dag_id: chain
tasks:
  one: {command: "echo one"}
  two: {command: "echo started > {marker}; sleep 30", depends_on: [one]}
  three: {command: "echo three", depends_on: [two]}
"""


async def _wait_for(predicate: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


async def _wait_for_store(
    store: Store, ti_pk: int, state: TaskState, timeout: float = 60.0
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        row = await store.get_task_instance(ti_pk)
        if row is not None and row.state is state:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"task instance {ti_pk} never reached {state} in the store")
        await asyncio.sleep(0.02)


async def test_a_restarted_scheduler_finishes_the_run_and_the_lost_try_costs_no_retry(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "two-started"
    spec = dag(CHAIN.replace("{marker}", str(marker)))
    first = await make_scheduler(spec)
    await first.start()
    row = await first.trigger("chain")
    await _wait_for(marker.exists)
    two = first.runs[row.pk].tasks["two"]
    # Committed, not only in the mirror: within a tick the mirror runs ahead of the
    # store, and a loop cancelled mid-flush never wrote "running" (this flaked under
    # load: the second scheduler then found the try queued and re-ran it as try 1).
    await _wait_for_store(store, two.pk, TaskState.RUNNING)
    # The scheduler dies: its loop stops, nothing more is written, its child is killed.
    assert first._loop_task is not None
    first._loop_task.cancel()
    pid = int((two.executor_ref or "pid:0").split(":")[1])
    os.killpg(pid, signal.SIGKILL)

    # The second scheduler's try of `two` must succeed: make the command quick now.
    quick = dag(CHAIN.replace("echo started > {marker}; sleep 30", "echo two"))
    second = await make_scheduler(quick)
    await second.start()
    final = await asyncio.wait_for(second.wait_run(row.pk), 30)
    assert final.state is RunState.SUCCESS
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert tis["two"].try_number == 2
    assert tis["two"].max_tries == 2  # the lost try was given back: retries is 0
    assert tis["one"].try_number == 1  # finished before the crash: not run again
    assert tis["three"].state is TaskState.SUCCESS


async def test_a_deposed_scheduler_stops_at_its_first_write(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        "dag_id: solo\ntasks:\n  a: {command: 'sleep 0.3'}\n"
        "  b: {command: 'true', depends_on: [a]}\n"
    )
    old = await make_scheduler(spec)
    await old.start()
    row = await old.trigger("solo")
    ti_a = old.runs[row.pk].tasks["a"].pk
    running: list[bool] = [False]

    async def a_running_in_store() -> None:
        while not running[0]:
            current = await store.get_task_instance(ti_a)
            running[0] = current is not None and current.state is TaskState.RUNNING
            await asyncio.sleep(0.01)

    await asyncio.wait_for(a_running_in_store(), 15)
    await store.take_office("new-leader")  # a newer leader exists from now on
    refused_before = metrics.STALE_WRITES._value.get()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(old.wait_run(row.pk), 15)
    assert metrics.STALE_WRITES._value.get() == refused_before + 1  # counted
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    # a's success and b's scheduling came after the takeover: neither was written.
    assert tis["a"].state is TaskState.RUNNING
    assert tis["b"].state is TaskState.NONE


async def test_a_run_triggered_through_the_store_is_picked_up_and_a_cancel_stops_it(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "long-started"
    spec = dag(
        f"dag_id: api_made\ntasks:\n  long: {{command: 'touch {marker}; sleep 30'}}\n"
        "  after: {command: 'true', depends_on: [long]}\n"
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    from leoflow.store.rows import TaskSeed

    row = await store.create_run(
        "api_made",
        "manual__from_api",
        run_type="manual",
        logical_date=None,
        conf={},
        tasks=[
            TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
            for t in spec.tasks.values()
        ],
        epoch=None,
    )
    await _wait_for(marker.exists)
    assert await store.transition_run(
        row.pk, RunState.RUNNING, RunState.FAILED, epoch=None, message="cancelled by ops"
    )
    await _wait_for(lambda: row.pk not in scheduler.runs)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert tis["long"].state is TaskState.FAILED
    assert tis["long"].reason == "cancelled"
    assert tis["after"].state is TaskState.FAILED
    assert tis["after"].message == "cancelled: cancelled by ops"


async def test_queued_but_never_started_tries_are_queued_again_with_the_same_number(
    store: Store,
) -> None:
    spec = dag("dag_id: q\ntasks:\n  a: {command: 'true'}\n")
    await store.upsert_dag(
        "q", fileloc="q.yaml", spec_json=spec.model_dump_json(), spec_hash="h", source=None
    )
    epoch = await store.take_office("crashed")

    class NeverStarts(SubprocessExecutor):
        async def launch(self, launch: object) -> None:
            return None

    crashed = Scheduler(store, NeverStarts(), SchedulerConfig(poll_interval=0.2), epoch=epoch)
    crashed.register_dags({"q": spec})
    await crashed.start()
    row = await crashed.trigger("q")
    ti = crashed.runs[row.pk].tasks["a"]
    await _wait_for(lambda: ti.state is TaskState.QUEUED)
    await crashed.stop()

    epoch = await store.take_office("restarted")
    restarted = Scheduler(
        store, SubprocessExecutor(), SchedulerConfig(poll_interval=0.2), epoch=epoch
    )
    await restarted.start()
    try:
        final = await asyncio.wait_for(restarted.wait_run(row.pk), 15)
    finally:
        await restarted.stop()
    assert final.state is RunState.SUCCESS
    (done,) = await store.list_task_instances(run_pk=row.pk)
    assert done.try_number == 1
