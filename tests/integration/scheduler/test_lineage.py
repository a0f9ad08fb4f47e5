"""OpenLineage events from a real scheduler (real subprocesses, SQLite) to a local
HTTP server: they never hold up the loop, and what fails or is dropped is counted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leoflow.domain.states import RunState
from leoflow.scheduler.core import Scheduler
from leoflow.scheduler.lineage import ATTEMPTS, EVENTS, Lineage
from leoflow.secrets import DirectorySecrets
from leoflow.settings_lineage import LineageSettings
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag, run_to_end
from tests.support.openlineage import validate
from tests.support.webhook import WebhookServer


def wide(n: int) -> str:
    tasks = "".join(f"  t{i}: {{command: 'true', produces: ['s3://b/t{i}']}}\n" for i in range(n))
    return f"dag_id: wide\ntasks:\n{tasks}"


def wire(scheduler: Scheduler, url: str, secrets: Path | None = None, **config: Any) -> None:
    scheduler.lineage = Lineage(
        LineageSettings(transport="http", url=url, endpoint="", backoff=0.0, **config)
    )
    if secrets is not None:
        scheduler.lineage.secrets = DirectorySecrets(secrets)


def count(outcome: str) -> float:
    value: float = EVENTS.labels(outcome=outcome)._value.get()
    return value


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(60):
        while not predicate():  # noqa: ASYNC110 - a counter sets no event
            await asyncio.sleep(0.02)


async def test_a_held_endpoint_holds_up_no_task_and_overflow_drops_the_oldest(
    make_scheduler: SchedulerFactory,
) -> None:
    async with WebhookServer() as hook:
        hook.hold.clear()  # no request is answered until the run has ended
        scheduler = await make_scheduler(dag(wide(30)), parallelism=8)
        wire(scheduler, hook.url, queue_size=10, timeout=300.0)
        dropped = count("dropped")
        await scheduler.start()
        run = await run_to_end(scheduler, "wide")
        assert run.state is RunState.SUCCESS
        # 62 events (30 tries and the run, START and COMPLETE each): one is in flight,
        # held; the queue keeps the newest 10; the other 51 were dropped, oldest first.
        await until(lambda: len(hook.requests) == 1)
        assert hook.answered == [] and scheduler.lineage.pending == 11
        assert count("dropped") - dropped == 51
        hook.hold.set()
        await until(lambda: len(hook.delivered()) == 11)
    last = hook.requests[-1]
    assert (last["eventType"], last["job"]["name"]) == ("COMPLETE", "wide")
    for event in hook.requests:
        validate(event)


async def test_a_failing_endpoint_is_retried_within_a_bound_and_counted(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ol-key").write_text("s3cret\n")
    async with WebhookServer(lambda body, seen: 503) as hook:
        scheduler = await make_scheduler(dag(wide(2)))
        wire(scheduler, hook.url, secrets, attempts=3, api_key_secret="ol-key")
        failed, attempts = count("failed"), ATTEMPTS._value.get()
        await scheduler.start()
        run = await run_to_end(scheduler, "wide")
        assert run.state is RunState.SUCCESS  # the endpoint's 503s changed nothing
        await until(lambda: count("failed") - failed == 6)
    assert len(hook.requests) == 18 and ATTEMPTS._value.get() - attempts == 18
    assert {h["authorization"] for h in hook.headers} == {"Bearer s3cret"}


async def test_a_refusing_endpoint_is_not_retried(make_scheduler: SchedulerFactory) -> None:
    async with WebhookServer(lambda body, seen: 400) as hook:
        scheduler = await make_scheduler(dag(wide(1)))
        wire(scheduler, hook.url, attempts=5)
        failed = count("failed")
        await scheduler.start()
        assert (await run_to_end(scheduler, "wide")).state is RunState.SUCCESS
        await until(lambda: count("failed") - failed == 4)
    assert len(hook.requests) == 4  # a 400 is final: one request per event


async def test_the_file_transport_appends_one_json_line_per_event(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    out = tmp_path / "lineage.jsonl"
    scheduler = await make_scheduler(dag(wide(1)))
    scheduler.lineage = Lineage(LineageSettings(transport="file", file=out))
    await scheduler.start()
    assert (await run_to_end(scheduler, "wide")).state is RunState.SUCCESS
    await until(lambda: out.exists() and len(out.read_text().splitlines()) == 4)
    events = [json.loads(line) for line in out.read_text().splitlines()]
    for event in events:
        validate(event)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("wide", "START"), ("wide.t0", "START"), ("wide.t0", "COMPLETE"), ("wide", "COMPLETE"),
    ]  # fmt: skip


async def test_a_run_cancelled_through_the_store_aborts_its_live_tries_and_itself(
    make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "long-started"
    spec = dag(
        f"dag_id: cut\ntasks:\n  long: {{command: 'touch {marker}; sleep 60'}}\n"
        "  after: {command: 'true', depends_on: [long]}\n"
    )
    async with WebhookServer() as hook:
        scheduler = await make_scheduler(spec)
        wire(scheduler, hook.url)
        await scheduler.start()
        row = await scheduler.trigger("cut")
        await until(marker.exists)
        await until(lambda: len(hook.delivered()) == 2)  # the run's START and long's
        # as the API's cancel does it: another process ends the run in the store
        assert await store.transition_run(
            row.pk, RunState.RUNNING, RunState.FAILED, epoch=None, message="cancelled by ops"
        )
        scheduler.wake()
        await until(lambda: len(hook.delivered()) == 4)
    seen = [(e["job"]["name"], e["eventType"]) for e in hook.delivered()]
    assert seen == [("cut", "START"), ("cut.long", "START"), ("cut.long", "ABORT"),
                    ("cut", "ABORT")]  # fmt: skip
    for event in hook.delivered():
        validate(event)


async def test_a_try_the_last_scheduler_left_running_ends_with_a_fail_after_restart(
    make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    command = f"[ -e {marker} ] || {{ touch {marker}; sleep 60; }}"
    spec = dag(f"dag_id: again\ntasks:\n  long: {{command: '{command}'}}\n")
    async with WebhookServer() as hook:
        first = await make_scheduler(spec)
        wire(first, hook.url)
        await first.start()
        row = await first.trigger("again")
        await until(lambda: len(hook.delivered()) == 2)  # the run's START and the try's
        await first.stop()  # its try's process dies with it; the store still says running
        second = await make_scheduler()
        wire(second, hook.url)
        await second.start()
        async with asyncio.timeout(60):
            done = await second.wait_run(row.pk)
        assert done.state is RunState.SUCCESS
        await until(lambda: len(hook.delivered()) == 6)
    seen = [(e["job"]["name"], e["eventType"], e["run"]["runId"]) for e in hook.delivered()]
    tries = [s for s in seen if s[0] == "again.long"]
    assert [kind for _, kind, _ in tries] == ["START", "FAIL", "START", "COMPLETE"]
    assert tries[0][2] == tries[1][2] != tries[2][2] == tries[3][2]  # try 1, then try 2
    assert [kind for name, kind, _ in seen if name == "again"] == ["START", "COMPLETE"]
