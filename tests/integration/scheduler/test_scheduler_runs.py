"""The scheduler drives real subprocesses through a real store: order, retries,
failures, timeouts and the limits admission enforces."""

from __future__ import annotations

import asyncio
import itertools
import subprocess

from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, Watch, dag, run_to_end


async def test_fan_out_fan_in_runs_each_task_after_its_upstreams(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        """
dag_id: diamond
tasks:
  a: {command: "echo a"}
  b: {command: "echo b", depends_on: [a]}
  c: {command: "echo c", depends_on: [a]}
  d: {command: "echo d", depends_on: [b, c]}
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    admitted_before = metrics.ADMITTED._value.get()
    row = await run_to_end(scheduler, "diamond")
    assert row.state is RunState.SUCCESS
    assert metrics.ADMITTED._value.get() == admitted_before + 4  # one decision per task
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert {t.state for t in tis.values()} == {TaskState.SUCCESS}
    for down, ups in {"b": ["a"], "c": ["a"], "d": ["b", "c"]}.items():
        for up in ups:
            started, ended = tis[down].started_at, tis[up].ended_at
            assert started is not None and ended is not None
            assert started >= ended
    assert await store.read_log(tis["d"].pk, 1) == b"d\n"


async def test_a_failing_try_is_retried_and_each_try_keeps_its_own_log(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        """
dag_id: flaky
tasks:
  t:
    retries: 2
    retry_delay: 50ms
    command: 'echo "try $LEOFLOW_TRY_NUMBER"; [ "$LEOFLOW_TRY_NUMBER" -ge 2 ]'
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "flaky")
    assert row.state is RunState.SUCCESS
    (ti,) = await store.list_task_instances(run_pk=row.pk)
    assert ti.try_number == 2
    assert await store.read_log(ti.pk, 1) == b"try 1\n"
    assert await store.read_log(ti.pk, 2) == b"try 2\n"


async def test_a_failure_marks_downstream_upstream_failed_and_spares_other_branches(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    spec = dag(
        """
dag_id: broken
tasks:
  extract: {command: "exit 3"}
  transform: {command: "echo never", depends_on: [extract]}
  load: {command: "echo never", depends_on: [transform]}
  side: {command: "echo side"}
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "broken")
    assert row.state is RunState.FAILED
    assert row.message == "failed tasks: extract"
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert tis["extract"].state is TaskState.FAILED
    assert tis["extract"].exit_code == 3
    assert tis["extract"].message == "exited with code 3"
    assert tis["transform"].state is TaskState.UPSTREAM_FAILED
    assert tis["transform"].message == "upstream failed: extract"
    assert tis["load"].state is TaskState.UPSTREAM_FAILED
    assert tis["load"].message == "upstream failed: transform"
    assert tis["side"].state is TaskState.SUCCESS


async def test_a_task_over_its_timeout_is_killed_with_its_children(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: object
) -> None:
    spec = dag(
        """
dag_id: slow
tasks:
  t:
    timeout: 300ms
    command: "sleep 30 & sleep 30; echo never"
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "slow")
    (ti,) = await store.list_task_instances(run_pk=row.pk)
    assert ti.state is TaskState.FAILED
    assert ti.reason == "timeout"
    assert ti.message is not None and ti.message.startswith("timed out after 300ms")
    assert await store.read_log(ti.pk, 1) == b""


async def test_max_active_tasks_bounds_a_dag_across_its_runs(
    make_scheduler: SchedulerFactory,
) -> None:
    tasks = "\n".join(f"  t{i}: {{command: 'sleep 0.05'}}" for i in range(12))
    spec = dag(f"dag_id: wide\nmax_active_runs: 2\nmax_active_tasks: 3\ntasks:\n{tasks}\n")
    scheduler = await make_scheduler(spec)
    watch = Watch()
    watch.attach(scheduler)
    await scheduler.start()
    first = await scheduler.trigger("wide")
    second = await scheduler.trigger("wide")
    for row in (first, second):
        assert (await scheduler.wait_run(row.pk)).state is RunState.SUCCESS
    assert watch.peak_by_dag["wide"] == 3


async def test_a_pool_bounds_its_tasks_and_a_full_pool_does_not_block_other_tasks(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    loads = "\n".join(f"  load{i}: {{command: 'sleep 0.1', pool: warehouse}}" for i in range(4))
    spec = dag(f"dag_id: pooled\ntasks:\n{loads}\n  quick: {{command: 'true'}}\n")
    scheduler = await make_scheduler(spec, pools={"warehouse": 1})
    watch = Watch()
    watch.attach(scheduler)
    await scheduler.start()
    row = await run_to_end(scheduler, "pooled")
    assert row.state is RunState.SUCCESS
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    windows = sorted(
        (tis[f"load{i}"].started_at or 0.0, tis[f"load{i}"].ended_at or 0.0) for i in range(4)
    )
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert start >= end  # one slot: the loads never overlap
    # The quick task was not stuck behind the pool: it finished before the last load began.
    assert (tis["quick"].ended_at or 0.0) <= windows[-1][0]


async def test_parallelism_bounds_everything(make_scheduler: SchedulerFactory) -> None:
    tasks = "\n".join(f"  t{i}: {{command: 'sleep 0.05'}}" for i in range(10))
    specs = [dag(f"dag_id: d{n}\nmax_active_tasks: 10\ntasks:\n{tasks}\n") for n in range(2)]
    scheduler = await make_scheduler(*specs, parallelism=4)
    watch = Watch()
    watch.attach(scheduler)
    await scheduler.start()
    rows = [await scheduler.trigger("d0"), await scheduler.trigger("d1")]
    for row in rows:
        assert (await scheduler.wait_run(row.pk)).state is RunState.SUCCESS
    assert watch.peak == 4


async def test_why_a_task_waits_names_the_limit_with_numbers(
    make_scheduler: SchedulerFactory,
) -> None:
    spec = dag(
        """
dag_id: waits
max_active_tasks: 1
tasks:
  first: {command: "sleep 5"}
  second: {command: "true"}
  after: {command: "true", depends_on: [first]}
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await scheduler.trigger("waits")
    mirror = scheduler.runs[row.pk]
    for _ in range(250):
        if {ti.state for ti in mirror.tasks.values()} >= {TaskState.RUNNING, TaskState.SCHEDULED}:
            break
        await asyncio.sleep(0.02)
    running = [t for t in mirror.tasks.values() if t.state is TaskState.RUNNING]
    waiting = [t for t in mirror.tasks.values() if t.state is TaskState.SCHEDULED]
    assert len(running) == 1 and len(waiting) == 1
    assert scheduler.why(waiting[0].pk) == "DAG waits has 1 of 1 max_active_tasks running"
    assert scheduler.why(mirror.tasks["after"].pk) == "waiting for upstream task(s) first"
    scheduler.request_cancel(running[0].pk, "test over")


async def test_a_command_that_leaves_a_background_process_still_finishes(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: object
) -> None:
    spec = dag(
        """
dag_id: leaves_child
tasks:
  t: {command: "sleep 30 & echo parent done"}
"""
    )
    scheduler = await make_scheduler(spec)
    await scheduler.start()
    row = await run_to_end(scheduler, "leaves_child")
    assert row.state is RunState.SUCCESS
    (ti,) = await store.list_task_instances(run_pk=row.pk)
    assert await store.read_log(ti.pk, 1) == b"parent done\n"
    pid = int((ti.executor_ref or "pid:0").split(":")[1])
    # The leftover `sleep` was in the task's session and was killed with it (it may take
    # a moment to be reaped once its parent is gone).
    for _ in range(250):
        if not _session_members(pid):
            break
        await asyncio.sleep(0.02)
    assert _session_members(pid) == []


def _session_members(sid: int) -> list[str]:
    """Live (not zombie) processes in session ``sid``."""
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    return [
        pid
        for pid, s, stat in (line.split() for line in out.splitlines())
        if s == str(sid) and "Z" not in stat
    ]


async def test_a_task_removed_from_the_dag_fails_in_runs_that_still_have_it(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    from leoflow.store.rows import TaskSeed

    spec = dag("dag_id: shrunk\ntasks:\n  kept: {command: 'echo kept'}\n")
    scheduler = await make_scheduler(spec)
    row = await store.create_run(
        "shrunk",
        "made_before_the_edit",
        run_type="manual",
        logical_date=None,
        conf={},
        tasks=[
            TaskSeed("kept", "default_pool", 1, 0, 1),
            TaskSeed("gone", "default_pool", 1, 0, 1),
        ],
        epoch=None,
    )
    await scheduler.start()
    final = await asyncio.wait_for(scheduler.wait_run(row.pk), 30)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    assert final.state is RunState.FAILED
    assert tis["kept"].state is TaskState.SUCCESS
    assert tis["gone"].state is TaskState.FAILED
    assert await store.read_log(tis["gone"].pk, 1) == b"task gone was removed from the DAG\n"
