"""Asset-triggered runs through Lite's real scheduler, agent and SQLite store: a
producing task's success records its events, and a DAG scheduled on those assets runs
once per condition met, with the events that triggered it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState
from leoflow.runtime.assembly import Runtime, open_runtime
from leoflow.runtime.dagfolder import record_dag
from leoflow.settings import load_settings
from tests.support.waiting import until

PY = json.dumps(sys.executable)
METADATA = json.dumps({"asset_metadata": {"ORDERS": {"rows": 3}}})
WRITER = json.dumps(f"import os; open(os.environ['LEOFLOW_OUTPUT'], 'w').write({METADATA!r})")
SHOW = json.dumps("import os; print(os.environ.get('LEOFLOW_TRIGGERING_ASSET_EVENTS'))")

PRODUCER = f"""
dag_id: land
tasks:
  orders:
    command: [{PY}, "-c", {WRITER}]
    produces: [ORDERS]
  customers:
    command: "true"
    produces: [s3://Bucket/customers]
"""
CONSUMER = f"""
dag_id: marts
schedule:
  assets: [ORDERS, s3://bucket/customers]
tasks:
  build:
    command: [{PY}, "-c", {SHOW}]
"""
EITHER = """
dag_id: either
schedule:
  assets: {any: [ORDERS, nothing_lands_here]}
tasks:
  build:
    command: "true"
"""


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[Runtime] = []

    async def open_with(*texts: str) -> Runtime:
        (tmp_path / "secrets").mkdir(exist_ok=True)
        settings = load_settings(
            home=tmp_path, scheduler_poll_interval=0.1, secrets_dir=tmp_path / "secrets"
        )
        rt = await open_runtime(settings, "agent")
        opened.append(rt)
        for index, text in enumerate(texts):
            path = tmp_path / f"dag{index}.yaml"
            await record_dag(rt.store, LoadedDag(parse_dag(text, path), path, text))
        await rt.scheduler.start()
        return rt

    yield open_with
    for rt in opened:
        await rt.close()


async def runs_of(rt: Runtime, dag_id: str) -> list[Any]:
    return await rt.store.list_runs(dag_id=dag_id)


async def finished(rt: Runtime, dag_id: str, count: int) -> None:
    async def done() -> bool:
        runs = await runs_of(rt, dag_id)
        return len(runs) >= count and all(r.state in (RunState.SUCCESS,) for r in runs)

    await until(done, f"{count} successful run(s) of {dag_id}")


async def test_a_producer_s_success_triggers_the_consumer_once_with_its_events(
    lite: Any,
) -> None:
    rt = await lite(PRODUCER, CONSUMER, EITHER)
    await rt.scheduler.trigger("land")
    await finished(rt, "land", 1)
    await finished(rt, "marts", 1)
    await finished(rt, "either", 1)
    events = await rt.store.list_asset_events()
    assert sorted((e.uri, e.dag_id, e.task_id, e.extra) for e in events) == [
        ("ORDERS", "land", "orders", {"rows": 3}),
        ("s3://bucket/customers", "land", "customers", None),
    ]
    (run,) = await runs_of(rt, "marts")
    assert run.run_type == "asset"
    (ti,) = await rt.store.list_task_instances(run_pk=run.pk)
    seen = json.loads((await rt.store.read_log(ti.pk, 1)).decode().strip().splitlines()[-1])
    assert sorted(e["uri"] for e in seen) == ["ORDERS", "s3://bucket/customers"]
    assert {e["id"] for e in seen} == {e.pk for e in events}
    assert [e.pk for e in await rt.store.run_asset_events(run.pk)] == sorted(e.pk for e in events)
    # Polls go on: the consumed events trigger nothing more.
    polls = rt.scheduler
    for _ in range(3):
        await polls._poll.run()
    assert len(await runs_of(rt, "marts")) == 1
    assert len(await runs_of(rt, "either")) == 1


async def test_all_waits_for_every_asset_and_a_flood_coalesces_into_one_run(
    lite: Any,
) -> None:
    rt = await lite(CONSUMER)
    for index in range(50):
        await rt.store.add_asset_event(
            "ORDERS", extra=None, idempotency_key=None, created_by=f"test{index}"
        )
    await rt.scheduler._poll.run()
    assert await runs_of(rt, "marts") == []  # customers has no event yet
    await rt.store.add_asset_event(
        "s3://bucket/customers", extra=None, idempotency_key=None, created_by="test"
    )
    await finished(rt, "marts", 1)
    (run,) = await runs_of(rt, "marts")
    linked = await rt.store.run_asset_events(run.pk)
    assert len(linked) == 51  # all 50 of the flood (under the kept bound) and the other


async def test_a_paused_dag_queues_one_trigger_and_runs_once_when_unpaused(lite: Any) -> None:
    rt = await lite(EITHER)
    await rt.store.set_dag_paused("either", True)
    await rt.scheduler._poll.run()
    for _ in range(3):  # three separate triggers' worth, each polled
        await rt.store.add_asset_event("ORDERS", extra=None, idempotency_key=None, created_by="t")
        await rt.scheduler._poll.run()
    assert await runs_of(rt, "either") == []
    await rt.store.set_dag_paused("either", False)
    await finished(rt, "either", 1)
    for _ in range(3):
        await rt.scheduler._poll.run()
    (run,) = await runs_of(rt, "either")
    assert len(await rt.store.run_asset_events(run.pk)) == 3  # all three, in one run


async def test_metadata_over_the_limit_fails_the_try_and_records_no_event(lite: Any) -> None:
    big = json.dumps({"asset_metadata": {"ORDERS": {"blob": "x" * 17000}}})
    writer = json.dumps(f"import os; open(os.environ['LEOFLOW_OUTPUT'], 'w').write({big!r})")
    rt = await lite(
        f"""
dag_id: land
tasks:
  orders:
    command: [{PY}, "-c", {writer}]
    produces: [ORDERS]
""",
        CONSUMER,
    )
    row = await rt.scheduler.trigger("land")
    async with asyncio.timeout(90):
        final = await rt.scheduler.wait_run(row.pk)
    assert final.state is RunState.FAILED
    (ti,) = await rt.store.list_task_instances(run_pk=row.pk)
    assert ti.reason == "output_invalid"
    assert ti.message is not None and "the limit is 16384 bytes" in ti.message
    assert await rt.store.list_asset_events() == []
    assert await runs_of(rt, "marts") == []
