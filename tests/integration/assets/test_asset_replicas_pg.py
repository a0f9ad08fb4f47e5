"""Two scheduler replicas on one PostgreSQL: an asset event triggers each consuming
DAG once, never twice, whether the replicas race on the same cursor or one of them
was deposed (its epoch is stale) while it still polls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.catalogue import spec_hash
from leoflow.executor.subprocess import SubprocessExecutor
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.store import Store
from leoflow.store.assets import LostTrigger, TriggerState
from leoflow.store.errors import StaleEpoch
from leoflow.store.rows import TaskSeed

CONSUMER = """
dag_id: marts
schedule: {assets: {any: [orders, customers]}}
tasks:
  build: {command: "true"}
"""


@pytest.fixture
async def two_stores(postgres_url: str) -> AsyncIterator[tuple[Store, Store]]:
    first = await Store.open(postgres_url)
    second = await Store.open(postgres_url)
    try:
        spec = parse_dag(CONSUMER, Path("marts.yaml"))
        text = spec.model_dump_json()
        await first.upsert_dag(
            "marts", fileloc="marts.yaml", spec_json=text, spec_hash=spec_hash(text), source=None
        )
        yield first, second
    finally:
        await first.close()
        await second.close()


async def asset_runs(store: Store) -> list[int]:
    return [r.pk for r in await store.list_runs(dag_id="marts") if r.run_type == "asset"]


async def emit(store: Store, uri: str) -> None:
    await store.add_asset_event(uri, extra=None, idempotency_key=None, created_by="test")


async def test_replicas_racing_on_one_cursor_make_one_run_per_round(
    two_stores: tuple[Store, Store],
) -> None:
    first, second = two_stores
    seeds = [TaskSeed("build", "default_pool", 1, 0, 1)]
    for round_ in range(1, 6):
        await emit(first, "orders")
        await emit(second, "customers")
        # Both read the same cursor, then both try to consume up to the newest events.
        states = [(await s.asset_trigger_states(["marts"]))["marts"] for s in (first, second)]
        assert states[0] == states[1]
        newest = await first.newest_asset_event_pks(["orders", "customers"])

        async def attempt(
            store: Store, state: TriggerState, consumed: dict[str, int] = newest
        ) -> bool:
            try:
                await store.create_asset_run(
                    "marts", state=state, consumed=consumed, tasks=seeds, epoch=None
                )
            except LostTrigger:
                return False
            return True

        won = await asyncio.gather(attempt(first, states[0]), attempt(second, states[1]))
        assert sorted(won) == [False, True]
        assert len(await asset_runs(first)) == round_
    runs = await asset_runs(first)
    linked = [sorted(e.uri for e in await first.run_asset_events(pk)) for pk in runs]
    assert linked == [["customers", "orders"]] * 5  # each run its own round's events


async def test_a_deposed_replica_s_poll_creates_nothing_and_the_leader_s_one_run(
    two_stores: tuple[Store, Store], tmp_path: Path
) -> None:
    first, second = two_stores
    old_epoch = await first.take_office("replica-a")
    new_epoch = await second.take_office("replica-b")  # replica-a is deposed

    def scheduler(store: Store, epoch: int) -> Scheduler:
        config = SchedulerConfig(poll_interval=0.2)
        return Scheduler(store, SubprocessExecutor(kill_grace=1.0), config, epoch=epoch)

    deposed, leader = scheduler(first, old_epoch), scheduler(second, new_epoch)
    await emit(first, "orders")
    with pytest.raises(StaleEpoch):  # the deposed replica sees the event first
        await deposed._poll.run()
    assert await asset_runs(first) == []  # and its run went with its transaction
    for _ in range(3):  # then both, side by side, again and again
        await asyncio.gather(
            deposed._poll.run(),
            leader._poll.run(),
            return_exceptions=True,
        )
        deposed._poll.forget()
        leader._poll.forget()
    assert len(await asset_runs(first)) == 1
