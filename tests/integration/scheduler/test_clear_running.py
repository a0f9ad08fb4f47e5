"""Clearing a task of a run that is still running (Lite: the API and the scheduler in
one process, real subprocesses): the live try is stopped and ends as ``cleared``, the
task runs again in the same run, and a finished upstream is left alone."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.execution import TaskFinished
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.core import Scheduler
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store import Store
from leoflow.store.clears import get_clear, request_clear
from tests.integration.api.conftest import auth_header, make_auth, make_settings
from tests.integration.scheduler.conftest import SchedulerFactory, dag
from tests.support.waiting import until

# root -> a -> {b, c}; b sleeps on its first try (its pid in a file) and later tries
# wait for the gate file; c is quick.
DAG = """
dag_id: clearing
tasks:
  root: {command: "echo root"}
  a: {command: "echo a", depends_on: [root]}
  b:
    depends_on: [a]
    command: >-
      echo "b try $LEOFLOW_TRY_NUMBER";
      if [ "$LEOFLOW_TRY_NUMBER" = 1 ]; then echo $$ > {pidfile}; sleep 120; echo slept; fi;
      while [ ! -f {gate} ]; do sleep 0.05; done
  c: {command: "echo c", depends_on: [a]}
"""


class Ends:
    """Every (task, state, try, reason) the scheduler's book goes through."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, TaskState, int, str | None]] = []

    def __call__(self, run: RunMirror, ti: TaskMirror) -> None:
        self.seen.append((ti.task_id, ti.state, ti.try_number, ti.reason))


def gone(pid: int) -> bool:
    """Ended (a zombie nobody has reaped yet counts: it runs no more)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.fixture
async def lite(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> AsyncIterator[tuple[Scheduler, httpx.AsyncClient, Path, Ends]]:
    pidfile = tmp_path / "b.pid"
    text = DAG.replace("{pidfile}", str(pidfile)).replace("{gate}", str(tmp_path / "gate"))
    scheduler = await make_scheduler(dag(text))
    ends = Ends()
    scheduler.watch(on_task=ends)
    await scheduler.start()
    app = create_app(store, make_settings(tmp_path), auth=make_auth(), notify=scheduler.wake)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield scheduler, client, pidfile, ends


def pid_in(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text else None


async def _b_running(scheduler: Scheduler, store: Store, pidfile: Path) -> tuple[int, int]:
    row = await scheduler.trigger("clearing", run_id="r1")

    async def started() -> bool:
        tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
        return (
            pid_in(pidfile) is not None
            and tis["b"].state is TaskState.RUNNING
            and tis["c"].state is TaskState.SUCCESS
        )

    await until(started, "b's first try to run and c to succeed")
    pid = pid_in(pidfile)
    assert pid is not None
    return row.pk, pid


async def test_clear_with_downstream_stops_the_running_try_and_reruns_in_the_same_run(
    lite: tuple[Scheduler, httpx.AsyncClient, Path, Ends], store: Store
) -> None:
    scheduler, client, pidfile, ends = lite
    (pidfile.parent / "gate").touch()
    run_pk, pid = await _b_running(scheduler, store, pidfile)
    response = await client.post(
        "/api/v1/dags/clearing/runs/r1/tasks/a/clear?downstream=true",
        headers=auth_header("operator"),
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["pending"] is True and body["cleared"] == ["a", "b", "c"]

    final = await asyncio.wait_for(scheduler.wait_run(run_pk), 90)
    assert final.state is RunState.SUCCESS
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run_pk)}
    assert {t: (ti.state, ti.try_number) for t, ti in tis.items()} == {
        "root": (TaskState.SUCCESS, 1),  # a finished upstream of the cleared task: not rerun
        "a": (TaskState.SUCCESS, 2),  # already succeeded, cleared: ran again
        "b": (TaskState.SUCCESS, 2),  # running when cleared: stopped, ran again
        "c": (TaskState.SUCCESS, 2),
    }
    # b's first try ended as cleared (in the book and so in the store), then b ran again.
    assert ("b", TaskState.NONE, 1, EndReason.CLEARED) in ends.seen
    b_states = [(s, n) for t, s, n, _ in ends.seen if t == "b"]
    assert b_states.index((TaskState.NONE, 1)) < b_states.index((TaskState.RUNNING, 2))
    assert (await store.read_log(tis["b"].pk, 1)).startswith(b"b try 1")
    assert b"slept" not in await store.read_log(tis["b"].pk, 1)
    assert await store.read_log(tis["b"].pk, 2) == b"b try 2\n"
    # The first try's process was told to stop (the cancel path), not left sleeping.
    for _ in range(400):
        if gone(pid):
            break
        await asyncio.sleep(0.05)
    assert gone(pid), f"the cleared try's process {pid} still runs"
    request = await get_clear(store, body["request_id"])
    assert request is not None and request.outcome == "cleared: a, b, c"
    # Retries are renewed from the cleared try: b has no retries, so max_tries = 1 + 1.
    assert tis["b"].max_tries == 2


async def test_clear_without_downstream_reruns_only_the_task(
    lite: tuple[Scheduler, httpx.AsyncClient, Path, Ends], store: Store
) -> None:
    scheduler, client, pidfile, _ = lite
    (pidfile.parent / "gate").touch()
    run_pk, _ = await _b_running(scheduler, store, pidfile)
    response = await client.post(
        "/api/v1/dags/clearing/runs/r1/tasks/b/clear", headers=auth_header("operator")
    )
    assert response.status_code == 202, response.text
    assert response.json()["cleared"] == ["b"]
    final = await asyncio.wait_for(scheduler.wait_run(run_pk), 90)
    assert final.state is RunState.SUCCESS
    tries = {t.task_id: t.try_number for t in await store.list_task_instances(run_pk=run_pk)}
    assert tries == {"root": 1, "a": 1, "b": 2, "c": 1}


async def test_a_completion_racing_the_clear_is_ignored_by_try_number(
    lite: tuple[Scheduler, httpx.AsyncClient, Path, Ends], store: Store
) -> None:
    """The try completes at the moment it is cleared: its outcome reaches the same tick
    as the clear. The clear wins (the task runs again); the late outcome of try 1 never
    ends the task, nor the new try."""
    scheduler, _, pidfile, ends = lite
    run_pk, _ = await _b_running(scheduler, store, pidfile)
    b = next(t for t in await store.list_task_instances(run_pk=run_pk) if t.task_id == "b")
    request = await request_clear(store, run_pk, "b", downstream=False, by="tester", at=0.0)
    scheduler.wake()
    # The first try's success, as the agent's Complete reports it: the same tick.
    await scheduler.submit(TaskFinished(b.pk, 1, 0, EndReason.SUCCESS, "", 0.0))

    async def second_try_running() -> bool:
        row = await store.get_task_instance(b.pk)
        return row is not None and (row.state, row.try_number) == (TaskState.RUNNING, 2)

    await until(second_try_running, "b's second try to run")
    # Try 1's success again, late (a resent Complete): the try number stops it.
    await scheduler.submit(TaskFinished(b.pk, 1, 0, EndReason.SUCCESS, "", 0.0))
    row = await store.get_task_instance(b.pk)
    assert row is not None and (row.state, row.try_number) == (TaskState.RUNNING, 2)
    assert ("b", TaskState.SUCCESS, 1) not in [(t, s, n) for t, s, n, _ in ends.seen]
    settled = await get_clear(store, request.pk)
    assert settled is not None and settled.outcome == "cleared: b"

    (pidfile.parent / "gate").touch()
    final = await asyncio.wait_for(scheduler.wait_run(run_pk), 90)
    assert final.state is RunState.SUCCESS
    row = await store.get_task_instance(b.pk)
    assert row is not None and (row.state, row.try_number) == (TaskState.SUCCESS, 2)
    assert await store.read_log(b.pk, 2) == b"b try 2\n"


async def test_clear_of_an_unknown_task_or_run_is_404(
    lite: tuple[Scheduler, httpx.AsyncClient, Path, Ends], store: Store
) -> None:
    scheduler, client, pidfile, _ = lite
    run_pk, _ = await _b_running(scheduler, store, pidfile)
    run = await store.get_run(run_pk)
    assert run is not None
    op = auth_header("operator")
    unknown_task = await client.post(
        f"/api/v1/dags/clearing/runs/{run.run_id}/tasks/nope/clear", headers=op
    )
    assert unknown_task.status_code == 404 and "nope" in unknown_task.json()["detail"]
    unknown_run = await client.post("/api/v1/dags/clearing/runs/ghost/tasks/b/clear", headers=op)
    assert unknown_run.status_code == 404 and "ghost" in unknown_run.json()["detail"]
    viewer = await client.post(
        f"/api/v1/dags/clearing/runs/{run.run_id}/tasks/b/clear", headers=auth_header("viewer")
    )
    assert viewer.status_code == 403
    # Nothing was recorded, so b's first try is still the one running.
    ti = next(t for t in await store.list_task_instances(run_pk=run_pk) if t.task_id == "b")
    assert (ti.state, ti.try_number) == (TaskState.RUNNING, 1)


async def test_the_lite_runtime_stops_the_try_through_its_pool_agent(tmp_path: Path) -> None:
    """As `leoflow lite` runs it: the agent executor (one pool agent, tasks dialing the
    gRPC endpoint) and the API waking the scheduler in the same process."""
    from leoflow.dagfile.loader import LoadedDag
    from leoflow.runtime.assembly import open_runtime
    from leoflow.runtime.dagfolder import record_dag

    pidfile = tmp_path / "b.pid"
    (tmp_path / "gate").touch()
    text = DAG.replace("{pidfile}", str(pidfile)).replace("{gate}", str(tmp_path / "gate"))
    settings = make_settings(tmp_path / "home", scheduler_poll_interval=0.2)
    runtime = await open_runtime(settings, "agent")
    try:
        await record_dag(runtime.store, LoadedDag(dag(text), tmp_path / "clearing.yaml", text))
        await runtime.scheduler.start()
        app = create_app(runtime.store, settings, auth=make_auth(), notify=runtime.scheduler.wake)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            run_pk, pid = await _b_running(runtime.scheduler, runtime.store, pidfile)
            response = await client.post(
                "/api/v1/dags/clearing/runs/r1/tasks/b/clear", headers=auth_header("operator")
            )
            assert response.status_code == 202, response.text
            final = await asyncio.wait_for(runtime.scheduler.wait_run(run_pk), 90)
        assert final.state is RunState.SUCCESS
        tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=run_pk)}
        assert {t: ti.try_number for t, ti in tis.items()} == {"root": 1, "a": 1, "b": 2, "c": 1}
        assert b"slept" not in await runtime.store.read_log(tis["b"].pk, 1)

        async def stopped() -> bool:
            return gone(pid)

        await until(stopped, f"the cleared try's process {pid} to end")
    finally:
        await runtime.close()


async def test_a_clear_that_loses_a_race_to_another_writer_is_applied_again(
    store: Store, tmp_path: Path
) -> None:
    """Pro: another replica's agent endpoint records the try's end in the store while
    the leader's book still has it running. The clear's compare-and-set loses; the
    run is read again and the clear applied to what the store holds, once."""
    from leoflow.executor.subprocess import SubprocessExecutor
    from leoflow.scheduler.core import SchedulerConfig

    pidfile = tmp_path / "b.pid"
    (tmp_path / "gate").touch()
    text = DAG.replace("{pidfile}", str(pidfile)).replace("{gate}", str(tmp_path / "gate"))
    spec = dag(text)
    spec_json = spec.model_dump_json()
    await store.upsert_dag(
        "clearing", fileloc="clearing.yaml", spec_json=spec_json, spec_hash="h", source=None
    )
    epoch = await store.take_office("race-test")
    # Polls only when woken: the clear below is applied by this test's call alone.
    config = SchedulerConfig(poll_interval=3600.0)
    scheduler = Scheduler(store, SubprocessExecutor(kill_grace=1.0), config, epoch=epoch)
    await scheduler.start()
    try:
        run_pk, _ = await _b_running(scheduler, store, pidfile)
        b = next(t for t in await store.list_task_instances(run_pk=run_pk) if t.task_id == "b")
        # The other replica's write: the book does not know of it yet.
        assert await store.transition_task(
            b.pk, TaskState.RUNNING, TaskState.SUCCESS, epoch=None, expected_try=1, ended_at=1.0
        )
        mirror = scheduler.task(b.pk)
        assert mirror is not None and mirror.state is TaskState.RUNNING
        request = await request_clear(store, run_pk, "b", downstream=False, by="t", at=0.0)
        await scheduler._clears.apply_pending()  # what the next poll does
        settled = await get_clear(store, request.pk)
        assert settled is not None
        assert (settled.outcome, settled.attempts) == ("cleared: b", 2)
        row = await store.get_task_instance(b.pk)
        assert row is not None and (row.state, row.try_number) == (TaskState.NONE, 1)
        scheduler.wake()
        final = await asyncio.wait_for(scheduler.wait_run(run_pk), 90)
        assert final.state is RunState.SUCCESS
        tries = {t.task_id: t.try_number for t in await store.list_task_instances(run_pk=run_pk)}
        assert tries == {"root": 1, "a": 1, "b": 2, "c": 1}  # b ran once more, not twice
    finally:
        await scheduler.stop()
