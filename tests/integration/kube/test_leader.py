"""Lease leader election against the fake apiserver, with the real client on the wire."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from leoflow.kube.client import KubeClient
from leoflow.kube.leader import ElectionConfig, LeaderElector
from tests.fakekube import FakeApiServer
from tests.integration.kube.conftest import RELEASE_NS, TASK_NS
from tests.support.proxy import CuttableProxy

LEASE = "leoflow-scheduler"


def timings(**overrides: float) -> dict[str, float]:
    # Whole seconds: a Lease records leaseDurationSeconds as an integer.
    values = {"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.1}
    values.update(overrides)
    return values


class Replica:
    """One elector and a record of its terms: (event, loop time)."""

    def __init__(self, name: str, client: KubeClient, **timing: float) -> None:
        self.name = name
        self.client = client
        self.elector = LeaderElector(client, ElectionConfig(LEASE, name, **timings(**timing)))
        self.events: list[tuple[str, float]] = []
        self.task: asyncio.Task[None] | None = None
        self.leading = asyncio.Event()

    async def _lead(self) -> None:
        loop = asyncio.get_running_loop()
        self.events.append(("lead", loop.time()))
        self.leading.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.events.append(("stop", loop.time()))
            self.leading.clear()

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self._lead))

    async def crash(self) -> None:
        """Like kill -9: the process is gone, the Lease is not released."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def shutdown(self) -> None:
        """Like SIGTERM: stop leading, then release the Lease."""
        await self.crash()
        await self.elector.release()


@pytest.fixture
async def replicas(server: FakeApiServer) -> AsyncIterator[Callable[..., Any]]:
    made: list[tuple[Replica, KubeClient]] = []

    def make(name: str, url: str | None = None, **timing: float) -> Replica:
        configuration = server.configuration()
        if url is not None:
            configuration.host = url
        client = KubeClient(configuration, task_namespace=TASK_NS, release_namespace=RELEASE_NS)
        replica = Replica(name, client, **timing)
        made.append((replica, client))
        return replica

    yield make
    for replica, client in made:
        if replica.task is not None and not replica.task.done():
            await replica.crash()
        await client.close()


async def test_one_replica_leads_and_the_lease_names_it(
    replicas: Callable[..., Replica], server: FakeApiServer
) -> None:
    a, b = replicas("a"), replicas("b")
    a.start()
    await asyncio.wait_for(a.leading.wait(), 10)
    b.start()
    await asyncio.sleep(0.5)  # several of b's retry periods
    assert not b.leading.is_set()
    lease = server.store.get("leases", RELEASE_NS, LEASE) if hasattr(server.store, "get") else None
    fetched = await a.client.get_lease(LEASE)
    assert fetched is not None and fetched["spec"]["holderIdentity"] == "a"
    assert lease is None or lease["spec"]["holderIdentity"] == "a"


async def test_after_the_leader_dies_another_leads_within_lease_duration_plus_retry(
    replicas: Callable[..., Replica],
) -> None:
    a, b = replicas("a"), replicas("b")
    a.start()
    await asyncio.wait_for(a.leading.wait(), 10)
    b.start()
    await a.crash()
    died = asyncio.get_running_loop().time()
    await asyncio.wait_for(b.leading.wait(), 10)
    took = b.events[0][1] - died
    config = b.elector.config
    # b may have last seen a's renewal up to one retry period before a died; the
    # half second is slack for a loaded machine, far below a second lease duration.
    assert config.lease_duration - config.retry_period <= took
    assert took <= config.lease_duration + config.retry_period + 0.5
    fetched = await b.client.get_lease(LEASE)
    assert fetched is not None
    assert fetched["spec"]["holderIdentity"] == "b"
    assert fetched["spec"]["leaseTransitions"] == 1


async def test_a_released_lease_is_taken_in_about_one_retry_period(
    replicas: Callable[..., Replica],
) -> None:
    a, b = (
        replicas("a", lease_duration=30.0, renew_deadline=20.0),
        replicas("b", lease_duration=30.0, renew_deadline=20.0),
    )
    a.start()
    await asyncio.wait_for(a.leading.wait(), 10)
    b.start()
    await asyncio.sleep(0.3)
    await a.shutdown()
    released = asyncio.get_running_loop().time()
    await asyncio.wait_for(b.leading.wait(), 10)
    # Far sooner than the 30 s lease: within a few retry periods of the release.
    assert b.events[0][1] - released < 1.0


async def test_a_leader_cut_off_from_the_apiserver_steps_down_before_its_lease_expires(
    replicas: Callable[..., Replica], server: FakeApiServer
) -> None:
    proxy = CuttableProxy("127.0.0.1", server.port)
    await proxy.start()
    try:
        a = replicas("a", url=proxy.url)
        b = replicas("b")
        a.start()
        await asyncio.wait_for(a.leading.wait(), 10)
        b.start()
        await proxy.cut()
        await asyncio.wait_for(b.leading.wait(), 15)
        stopped = [t for event, t in a.events if event == "stop"]
        took_over = b.events[0][1]
        assert stopped, "the cut-off leader never stopped leading"
        assert stopped[0] < took_over  # never two leaders at once
    finally:
        await proxy.stop()


async def test_a_stale_write_to_the_lease_is_refused_and_does_not_take_it(
    replicas: Callable[..., Replica],
) -> None:
    a = replicas("a")
    assert await a.elector.try_acquire_or_renew()
    lease = await a.client.get_lease(LEASE)
    assert lease is not None
    assert await a.elector.try_acquire_or_renew()  # renewed: the resourceVersion moved on
    b = replicas("b")
    stale = dict(lease)
    stale["spec"] = {**lease["spec"], "holderIdentity": "b"}
    from leoflow.kube.errors import Conflict

    with pytest.raises(Conflict):
        await b.client.update_lease(LEASE, stale)
    current = await a.client.get_lease(LEASE)
    assert current is not None and current["spec"]["holderIdentity"] == "a"
