"""Marking tasks success or failed and clearing a run's failed tasks through the API,
with the scheduler in the same process acting on them (real subprocesses): the
marked states hold, the tasks below are decided again by their trigger rules, and
the run ends by its tasks' states."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.core import Scheduler
from leoflow.store import Store
from leoflow.store.clears import get_clear
from leoflow.store.rows import RunRow
from tests.integration.api.conftest import auth_header, make_auth, make_settings
from tests.integration.scheduler.conftest import SchedulerFactory, dag
from tests.support.waiting import until

# a fails until the gate file exists; b and c wait on it; handler runs only if a failed.
DAG = """
dag_id: marking
tasks:
  a: {command: "test -f {gate} || exit 3"}
  b: {command: "echo b", depends_on: [a]}
  c: {command: "echo c", depends_on: [b]}
  handler: {command: "echo handler", depends_on: [a], trigger_rule: all_failed}
"""
# slow runs until told; after needs it to succeed, cleanup runs whatever it did.
SLOW = """
dag_id: slow
tasks:
  slow: {command: "sleep 120"}
  after: {command: "echo after", depends_on: [slow]}
  cleanup: {command: "echo cleanup", depends_on: [slow], trigger_rule: all_done}
"""


@pytest.fixture
async def lite(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> AsyncIterator[tuple[Scheduler, httpx.AsyncClient, Path]]:
    gate = tmp_path / "gate"
    scheduler = await make_scheduler(dag(DAG.replace("{gate}", str(gate))), dag(SLOW))
    await scheduler.start()
    app = create_app(store, make_settings(tmp_path), auth=make_auth(), notify=scheduler.wake)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield scheduler, client, gate


async def _ended(scheduler: Scheduler, pk: int) -> RunState:
    async with asyncio.timeout(90):
        return (await scheduler.wait_run(pk)).state


async def _states(store: Store, pk: int) -> dict[str, tuple[TaskState, int]]:
    return {t.task_id: (t.state, t.try_number) for t in await store.list_task_instances(run_pk=pk)}


async def _slow_running(scheduler: Scheduler, store: Store, run_id: str) -> RunRow:
    row = await scheduler.trigger("slow", run_id=run_id)

    async def running() -> bool:
        return (await _states(store, row.pk))["slow"][0] is TaskState.RUNNING

    await until(running, "slow to run")
    return row


async def _failed_run(scheduler: Scheduler, store: Store) -> int:
    row = await scheduler.trigger("marking", run_id="r1")
    assert await _ended(scheduler, row.pk) is RunState.FAILED
    assert await _states(store, row.pk) == {
        "a": (TaskState.FAILED, 1),
        "b": (TaskState.UPSTREAM_FAILED, 0),
        "c": (TaskState.UPSTREAM_FAILED, 0),
        "handler": (TaskState.SUCCESS, 1),
    }
    return row.pk


async def test_marking_a_failed_task_success_runs_its_downstream_and_the_run_succeeds(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, _ = lite
    pk = await _failed_run(scheduler, store)
    r = await client.post(
        "/api/v1/dags/marking/runs/r1/tasks/a/mark?state=success", headers=auth_header("operator")
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["marked"], body["reopened"]) == (["a"], ["b", "c"])
    assert body["run"]["state"] == "running"
    assert await _ended(scheduler, pk) is RunState.SUCCESS
    assert await _states(store, pk) == {
        "a": (TaskState.SUCCESS, 1),  # marked, not run again
        "b": (TaskState.SUCCESS, 1),  # decided again: ran
        "c": (TaskState.SUCCESS, 1),
        "handler": (TaskState.SUCCESS, 1),  # it ran: kept
    }
    a = {t.task_id: t for t in await store.list_task_instances(run_pk=pk)}["a"]
    assert (a.reason, a.message) == (EndReason.MARKED, "marked success by operator")


async def test_marking_a_running_task_failed_stops_it_and_trigger_rules_decide_below(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, _ = lite
    row = await _slow_running(scheduler, store, "s1")
    r = await client.post(
        "/api/v1/dags/slow/runs/s1/tasks/slow/mark?state=failed", headers=auth_header("operator")
    )
    assert r.status_code == 202, r.text
    assert r.json()["pending"] is True and r.json()["marked"] == ["slow"]
    assert await _ended(scheduler, row.pk) is RunState.FAILED
    assert await _states(store, row.pk) == {
        "slow": (TaskState.FAILED, 1),
        "after": (TaskState.UPSTREAM_FAILED, 0),  # all_success: cannot run now
        "cleanup": (TaskState.SUCCESS, 1),  # all_done: ran
    }
    request = await get_clear(store, r.json()["request_id"])
    assert request is not None and request.outcome == "marked failed: slow"


async def test_marking_success_with_downstream_marks_below_without_running_them(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, _ = lite
    row = await _slow_running(scheduler, store, "s2")
    r = await client.post(
        "/api/v1/dags/slow/runs/s2/tasks/slow/mark?state=success&downstream=true",
        headers=auth_header("operator"),
    )
    assert r.status_code == 202, r.text
    assert r.json()["marked"] == ["after", "cleanup", "slow"]
    assert await _ended(scheduler, row.pk) is RunState.SUCCESS
    assert await _states(store, row.pk) == {
        "slow": (TaskState.SUCCESS, 1),
        "after": (TaskState.SUCCESS, 0),  # marked: never ran
        "cleanup": (TaskState.SUCCESS, 0),
    }


async def test_marking_with_upstream_marks_the_tasks_above(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, _ = lite
    pk = await _failed_run(scheduler, store)
    r = await client.post(
        "/api/v1/dags/marking/runs/r1/tasks/b/mark?state=success&upstream=true",
        headers=auth_header("operator"),
    )
    assert r.status_code == 200, r.text
    assert (r.json()["marked"], r.json()["reopened"]) == (["a", "b"], ["c"])
    assert await _ended(scheduler, pk) is RunState.SUCCESS
    assert (await _states(store, pk))["c"] == (TaskState.SUCCESS, 1)


async def test_clear_failed_reruns_the_failed_and_upstream_failed_tasks(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, gate = lite
    pk = await _failed_run(scheduler, store)
    gate.touch()  # a succeeds from now on
    r = await client.post(
        "/api/v1/dags/marking/runs/r1/clear_failed", headers=auth_header("operator")
    )
    assert r.status_code == 200, r.text
    assert r.json()["cleared"] == ["a", "b", "c"]
    assert await _ended(scheduler, pk) is RunState.SUCCESS
    assert await _states(store, pk) == {
        "a": (TaskState.SUCCESS, 2),
        "b": (TaskState.SUCCESS, 1),
        "c": (TaskState.SUCCESS, 1),
        "handler": (TaskState.SUCCESS, 1),  # succeeded: not cleared
    }
    again = await client.post(
        "/api/v1/dags/marking/runs/r1/clear_failed", headers=auth_header("operator")
    )
    assert again.status_code == 409
    assert "has no failed task" in again.json()["detail"]


async def test_clear_failed_of_a_running_run_is_applied_by_the_scheduler(
    lite: tuple[Scheduler, httpx.AsyncClient, Path], store: Store
) -> None:
    scheduler, client, _ = lite
    row = await _slow_running(scheduler, store, "s3")
    none = await client.post(
        "/api/v1/dags/slow/runs/s3/clear_failed", headers=auth_header("operator")
    )
    assert none.status_code == 409  # nothing failed yet
    # Fail it by hand, then clear the failed: slow runs again.
    r = await client.post(
        "/api/v1/dags/slow/runs/s3/tasks/slow/mark?state=failed&downstream=true",
        headers=auth_header("operator"),
    )
    assert r.status_code == 202, r.text

    async def marked() -> bool:
        return (await _states(store, row.pk))["slow"][0] is TaskState.FAILED

    await until(marked, "the mark to be applied")
    cleared = await client.post(
        "/api/v1/dags/slow/runs/s3/clear_failed", headers=auth_header("operator")
    )
    # 202 if the run has not ended yet (the scheduler clears), 200 once it has.
    assert cleared.status_code in (200, 202), cleared.text
    assert cleared.json()["cleared"] == ["after", "cleanup", "slow"]

    async def rerunning() -> bool:
        return (await _states(store, row.pk))["slow"] == (TaskState.RUNNING, 2)

    await until(rerunning, "slow's second try")
