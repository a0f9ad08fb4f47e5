"""The database lease's rules, on SQLite and PostgreSQL, with a clock the test moves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from leoflow.store import Store
from leoflow.store.leader import (
    DbElectionConfig,
    DbLeaderElector,
    LeaseHeld,
    claim_or_refuse,
    holder_is_dead_here,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    server = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'leoflow.db'}"
    else:
        server = request.getfixturevalue("postgres_server")
        url = await server.create_database()
    s = await Store.open(url)
    try:
        yield s
    finally:
        await s.close()
        if server is not None:
            await server.drop_database(url)


def elector(store: Store, name: str, clock: Clock, **timings: float) -> DbLeaderElector:
    config = DbElectionConfig(
        identity=name,
        lease_duration=timings.get("lease_duration", 15.0),
        renew_deadline=timings.get("renew_deadline", 10.0),
        retry_period=timings.get("retry_period", 2.0),
    )
    return DbLeaderElector(store, config, clock=clock)


async def test_one_holder_takeover_only_after_expiry_by_the_observers_clock(store: Store) -> None:
    clock_a, clock_b = Clock(), Clock()
    a, b = elector(store, "a", clock_a), elector(store, "b", clock_b)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b sees a's row change now
    clock_b.now += 14.9
    assert not await b.try_acquire_or_renew()
    assert await a.try_acquire_or_renew()  # a renews: b's expiry counts from here
    clock_b.now += 14.9
    assert not await b.try_acquire_or_renew()
    clock_b.now += 15.1  # nothing changed for a lease duration by b's clock
    assert await b.try_acquire_or_renew()
    row = await store.get_lease()
    assert (row.holder, row.transitions) == ("b", 1)
    assert not await a.try_acquire_or_renew()  # a now observes b's fresh row


async def test_a_lost_race_is_visible(store: Store) -> None:
    clock = Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    row = await store.get_lease()
    assert await store.write_lease(row.version, row) is not None
    assert await store.write_lease(row.version, row) is None  # stale version
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()


async def test_release_hands_over_at_once(store: Store) -> None:
    clock = Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert await b.try_acquire_or_renew()  # same instant: no expiry needed
    assert (await store.get_lease()).holder == "b"


async def test_a_leader_that_cannot_renew_stops_leading_before_the_lease_expires(
    store: Store,
) -> None:
    a = DbLeaderElector(
        store,
        DbElectionConfig("a", lease_duration=3.0, renew_deadline=1.0, retry_period=0.1),
    )
    led = asyncio.Event()
    stopped = asyncio.Event()

    async def lead() -> None:
        led.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    running = asyncio.create_task(a.run(lead))
    try:
        await asyncio.wait_for(led.wait(), 30)
        # Someone else writes the row: a's next renewal sees another holder.
        row = await store.get_lease()
        stolen = await store.write_lease(row.version, replace(row, holder="x"))
        assert stolen is not None
        await asyncio.wait_for(stopped.wait(), 30)
        assert not a.is_leader
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


async def test_claim_or_refuse_names_a_live_holder(store: Store) -> None:
    holder = elector(store, "otherhost-4242", Clock())
    assert await holder.try_acquire_or_renew()
    config = DbElectionConfig("me", lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
    with pytest.raises(LeaseHeld, match=r"led by another live scheduler, otherhost-4242"):
        await claim_or_refuse(store, config, "the-url")
    assert (await store.get_lease()).holder == "otherhost-4242"


async def test_claim_takes_over_from_a_dead_process_of_this_host(store: Store) -> None:
    import socket

    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()
    dead = f"{socket.gethostname()}-{proc.pid}"
    assert holder_is_dead_here(dead)
    assert not holder_is_dead_here(f"{socket.gethostname()}-{__import__('os').getpid()}")
    assert await elector(store, dead, Clock()).try_acquire_or_renew()
    config = DbElectionConfig("me", lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
    claimed = await claim_or_refuse(store, config, "the-url")
    assert claimed.is_leader and (await store.get_lease()).holder == "me"


async def _stale_row(store: Store, holder: str, duration: float) -> None:
    """A row held by ``holder`` whose renew time (its clock) looks long past to ours."""
    from dataclasses import replace

    row = await store.get_lease()
    written = await store.write_lease(
        row.version, replace(row, holder=holder, renew_time=0.0, lease_duration=duration)
    )
    assert written is not None


async def test_claim_takes_a_stale_lease_once_it_stays_unchanged(store: Store) -> None:
    await _stale_row(store, "otherhost-1", 1.0)
    config = DbElectionConfig("me", lease_duration=1.0, renew_deadline=0.5, retry_period=0.1)
    claimed = await asyncio.wait_for(claim_or_refuse(store, config, "the-url"), 30)
    row = await store.get_lease()
    assert claimed.is_leader and row.holder == "me" and row.transitions == 1


async def test_claim_refuses_a_holder_that_renews_while_watched(store: Store) -> None:
    """Its clock may lag ours (renew_time looks old), but the row keeps changing."""
    from dataclasses import replace

    await _stale_row(store, "otherhost-2", 5.0)
    stop = asyncio.Event()

    async def renew() -> None:
        while not stop.is_set():
            row = await store.get_lease()
            await store.write_lease(row.version, replace(row, renew_time=1.0))
            await asyncio.sleep(0.05)

    renewer = asyncio.create_task(renew())
    config = DbElectionConfig("me", lease_duration=5.0, renew_deadline=2.0, retry_period=0.2)
    try:
        with pytest.raises(LeaseHeld, match=r"otherhost-2 .*renewed the lease while we watched"):
            await asyncio.wait_for(claim_or_refuse(store, config, "the-url"), 30)
    finally:
        stop.set()
        await renewer
    assert (await store.get_lease()).holder == "otherhost-2"
