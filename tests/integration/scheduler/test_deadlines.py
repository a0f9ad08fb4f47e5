"""Run deadlines and whole-run timeouts, with real processes and a local webhook."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from leoflow.api.app import create_app
from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings
from tests.integration.scheduler.conftest import SchedulerFactory, dag
from tests.integration.scheduler.test_notifications import drained, wire
from tests.support.webhook import WebhookServer


def spec(dag_id: str, fields: str, command: str) -> str:
    return (
        f"dag_id: {dag_id}\n{fields}\n"
        "notify: [{events: [deadline_missed, failure], webhook_secret: hook}]\n"
        f"tasks:\n  work:\n    command: {command!r}\n"
    )


async def test_a_late_run_is_marked_notified_once_and_goes_on(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    async with WebhookServer() as hook:
        scheduler = await make_scheduler(dag(spec("late", "deadline: 1s", "sleep 3")))
        wire(scheduler, tmp_path / "secrets", hook.url)
        await scheduler.start()
        row = await scheduler.trigger("late")
        final = await asyncio.wait_for(scheduler.wait_run(row.pk), 90)
        await drained(scheduler)
    assert final.state is RunState.SUCCESS  # a deadline reports; it does not stop the run
    assert final.deadline_missed_at is not None and final.ended_at is not None
    assert final.created_at + 1.0 <= final.deadline_missed_at <= final.ended_at
    (note,) = hook.delivered()
    assert (note["event"], note["run_id"], note["state"]) == ("deadline_missed", row.run_id,
                                                               "running")  # fmt: skip
    assert note["message"] == "not finished 1.0s after its trigger"
    app = create_app(store, make_settings(tmp_path), auth=make_auth())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as api:
        out = (await api.get(f"/api/v1/dags/late/runs/{row.run_id}",
                             headers=auth_header("viewer"))).json()  # fmt: skip
    assert out["deadline_missed_at"] is not None


async def test_deadline_counts_from_the_logical_date(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    scheduler = await make_scheduler(
        dag(spec("dated", 'schedule: "@daily"\ndeadline: 2h', "true")),
        dag(spec("early", "deadline: 2h", "true")),
    )
    wire(scheduler, tmp_path / "secrets", None)
    await scheduler.start()
    past = await scheduler.trigger("dated", logical_date=time.time() - 3 * 3600)
    fresh = await scheduler.trigger("early")
    late = await asyncio.wait_for(scheduler.wait_run(past.pk), 60)
    on_time = await asyncio.wait_for(scheduler.wait_run(fresh.pk), 60)
    assert late.state is RunState.SUCCESS and late.deadline_missed_at is not None
    assert past.logical_date is not None
    assert late.deadline_missed_at >= past.logical_date + 2 * 3600
    assert on_time.state is RunState.SUCCESS and on_time.deadline_missed_at is None


async def test_run_timeout_fails_the_run_and_stops_its_task(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    async with WebhookServer() as hook:
        scheduler = await make_scheduler(dag(spec("slow", "run_timeout: 1s", "sleep 60")))
        wire(scheduler, tmp_path / "secrets", hook.url)
        await scheduler.start()
        row = await scheduler.trigger("slow")
        final = await asyncio.wait_for(scheduler.wait_run(row.pk), 60)
        await hook.wait_for(lambda: len(hook.delivered()) >= 1)
        await drained(scheduler)
    assert final.state is RunState.FAILED
    assert final.message == "the run timed out after 1.0s (run_timeout)"
    (ti,) = await store.list_task_instances(run_pk=row.pk)
    assert ti.state is TaskState.FAILED and ti.reason == "cancelled"
    assert [(n["event"], n["message"]) for n in hook.delivered()] == [
        ("failure", "the run timed out after 1.0s (run_timeout)")
    ]
