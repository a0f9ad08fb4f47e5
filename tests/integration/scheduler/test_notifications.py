"""Webhook notifications from the scheduler to a local HTTP server, real processes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.states import RunState
from leoflow.scheduler.core import Scheduler
from leoflow.scheduler.notifications import DELIVERIES, Notifications, NotifyConfig
from leoflow.secrets import DirectorySecrets
from tests.integration.scheduler.conftest import SchedulerFactory, dag, run_to_end
from tests.support.webhook import WebhookServer

ALERTS = """
dag_id: alerts
notify: [{events: [failure, success], webhook_secret: hook}]
tasks:
  flaky:
    command: "echo broken >&2; exit 3"
    retries: 1
    notify: [{events: [retry, failure], webhook_secret: hook, format: slack}]
  fine:
    command: "true"
    notify: [{events: [success], webhook_secret: hook}]
"""


def wire(scheduler: Scheduler, secrets: Path, url: str | None, **config: Any) -> None:
    secrets.mkdir(exist_ok=True)
    if url is not None:
        (secrets / "hook").write_text(url)
    scheduler.notifications = Notifications(
        DirectorySecrets(secrets), NotifyConfig(backoff=0.05, **config)
    )


async def drained(scheduler: Scheduler) -> None:
    async def loop() -> None:
        while scheduler.notifications.pending:  # noqa: ASYNC110 - workers set no event
            await asyncio.sleep(0.02)

    await asyncio.wait_for(loop(), 60)


def outcome(event: str, result: str) -> float:
    value: float = DELIVERIES.labels(event=event, outcome=result)._value.get()
    return value


async def test_each_event_is_delivered_once_after_a_500(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    # The first arrival of every notification is answered 500, the second 200.
    async with WebhookServer(lambda body, seen: 500 if seen == 0 else 200) as hook:
        scheduler = await make_scheduler(dag(ALERTS))
        wire(scheduler, tmp_path / "secrets", hook.url)
        await scheduler.start()
        run = await run_to_end(scheduler, "alerts")
        assert run.state is RunState.FAILED  # the notifier's 500s changed nothing
        await hook.wait_for(lambda: len(hook.delivered()) >= 4)
        await drained(scheduler)
    delivered = hook.delivered()
    assert len(delivered) == 4 and len(hook.requests) == 8
    slack = sorted(body["text"] for body in delivered if "text" in body)
    assert slack == [
        f"Leoflow: alerts: task flaky of run {run.run_id} failed (try 2)\n>exited with code 3",
        f"Leoflow: alerts: task flaky of run {run.run_id} failed and will be retried (try 1)"
        "\n>exited with code 3",
    ]
    generic = sorted((b["event"], b["task_id"], b["state"]) for b in delivered if "event" in b)
    assert generic == [("failure", None, "failed"), ("success", "fine", "success")]
    run_failure = next(b for b in delivered if b.get("task_id") is None and "event" in b)
    assert run_failure["run_id"] == run.run_id and "flaky" in run_failure["message"]


async def test_a_missing_secret_is_a_logged_failed_delivery(
    make_scheduler: SchedulerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = await make_scheduler(
        dag("dag_id: quiet\ntasks:\n  a:\n    command: 'true'\n"
            "    notify: [{events: [success], webhook_secret: nothere}]\n")
    )  # fmt: skip
    wire(scheduler, tmp_path / "secrets", None)
    before = outcome("success", "failed")
    await scheduler.start()
    with caplog.at_level(logging.ERROR, logger="leoflow.scheduler.notify"):
        run = await run_to_end(scheduler, "quiet")
        assert run.state is RunState.SUCCESS

        async def counted() -> None:
            while outcome("success", "failed") == before:  # noqa: ASYNC110 - a counter
                await asyncio.sleep(0.02)

        await asyncio.wait_for(counted(), 30)
    assert "webhook secret 'nothere' does not exist" in caplog.text


async def test_a_slow_webhook_never_holds_up_a_200_task_run(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    tasks = "".join(
        f"  t{n}:\n    command: 'true'\n    notify: [{{events: [success], webhook_secret: hook}}]\n"
        for n in range(200)
    )
    async with WebhookServer() as hook:
        hook.hold.clear()  # every request waits for an answer until the run has ended
        scheduler = await make_scheduler(dag(f"dag_id: wide\ntasks:\n{tasks}"), parallelism=64)
        wire(scheduler, tmp_path / "secrets", hook.url, timeout=300.0)
        await scheduler.start()
        run = await run_to_end(scheduler, "wide", timeout=300)
        assert run.state is RunState.SUCCESS
        assert hook.answered == [] and scheduler.notifications.pending == 200
        hook.hold.set()
        await hook.wait_for(lambda: len(hook.delivered()) >= 200, timeout=120)
        await drained(scheduler)
    assert sorted(body["task_id"] for body in hook.delivered()) == sorted(
        f"t{n}" for n in range(200)
    )
    assert len(hook.requests) == 200
