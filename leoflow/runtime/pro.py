"""Pro's scheduler process: ``leoflow scheduler``.

Every replica serves the agent endpoint (an agent's connection sticks to
whichever replica it reached). One replica leads, by a Lease: it takes office
in the store (bumping the fencing epoch) and runs the scheduler loop with its
executor; losing the Lease stops them at once. SIGTERM releases the Lease so a
rolling update hands over in about one retry period. Without the Kubernetes
executor the lease is a row in the store (``leoflow/store/leader.py``), with the
same semantics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys

from leoflow.domain.leadership import Elector
from leoflow.runtime.assembly import Closer
from leoflow.runtime.health import serve_health
from leoflow.runtime.heap import freeze_startup
from leoflow.runtime.lease import db_election_config
from leoflow.runtime.parts import make_executor, scheduler_config, serve_agents, side_channels
from leoflow.scheduler import metrics
from leoflow.scheduler.core import Scheduler
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.errors import StoreError

log = logging.getLogger("leoflow.runtime.pro")


def identity_of(settings: Settings) -> str:
    return settings.identity or f"{socket.gethostname()}-{os.getpid()}"


class SchedulerReplica:
    """One ``leoflow scheduler`` process: endpoint always, scheduler while leading."""

    def __init__(self, settings: Settings, store: Store, executor_name: str) -> None:
        self.settings = settings
        self.store = store
        self.executor_name = executor_name
        self.identity = identity_of(settings)
        self.scheduler: Scheduler | None = None
        self.agent_address = ""

    def current(self) -> Scheduler | None:
        return self.scheduler

    async def lead(self) -> None:
        """One term of office: until the scheduler loop stops or this is cancelled."""
        epoch = await self.store.take_office(self.identity)
        metrics.EPOCH.set(epoch)
        metrics.LEADER.set(1)
        metrics.LEADER_TRANSITIONS.labels(to="leader").inc()
        log.info("took office with epoch %d", epoch)
        scheduler: Scheduler | None = None
        try:
            executor = make_executor(
                self.settings, self.executor_name, agent_endpoint=self.agent_address
            )
            pools = {p.name: p.slots for p in await self.store.list_pools()}
            scheduler = Scheduler(
                self.store, executor, scheduler_config(self.settings, pools), epoch=epoch
            )
            side_channels(scheduler, self.settings)
            await scheduler.start()
            freeze_startup()
            self.scheduler = scheduler
            await scheduler.join()
        finally:
            self.scheduler = None
            metrics.LEADER.set(0)
            metrics.LEADER_TRANSITIONS.labels(to="follower").inc()
            try:
                if scheduler is not None:
                    await scheduler.stop()
            finally:  # out of office, even if stopping hit a database that is gone
                log.info("left office (epoch %d)", epoch)


async def serve_scheduler(settings: Settings, *, executor_name: str | None = None) -> int:
    name = executor_name or settings.executor
    if name == "docker":
        print(
            "leoflow scheduler: the docker executor is Lite's (leoflow run / leoflow lite): "
            "its containers dial this one process; use executor kubernetes here",
            file=sys.stderr,
        )
        return 2
    if name == "kubernetes" and not settings.token_signing_key:
        print(
            "leoflow scheduler: set LEOFLOW_TOKEN_SIGNING_KEY: every replica must verify "
            "the session tokens any replica signed",
            file=sys.stderr,
        )
        return 2
    try:
        store = await Store.open(settings.resolved_database_url)
    except (StoreError, OSError) as exc:
        print(f"leoflow scheduler: cannot open the database: {exc}", file=sys.stderr)
        return 1
    replica = SchedulerReplica(settings, store, name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    closers: list[Closer] = []
    try:
        service = await serve_agents(settings, store, replica.current)
        replica.agent_address = service.address
        closers.append(service.close)
        if settings.metrics_listen:

            async def ready() -> bool:
                try:
                    await store.current_epoch()
                except Exception:
                    return False
                return True

            closers.append(await serve_health(settings.metrics_listen, ready))
        if name == "kubernetes":
            await _lead_by_lease(settings, replica, stop)
        else:
            await _lead_by_database(settings, replica, stop)
    finally:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                await close()
        await store.close()
    return 0


async def _lead_by_database(
    settings: Settings, replica: SchedulerReplica, stop: asyncio.Event
) -> None:
    """Without Kubernetes the lease is a row in the store, with the Lease's semantics."""
    from leoflow.store.leader import DbLeaderElector

    elector = DbLeaderElector(replica.store, db_election_config(settings, replica.identity))
    await _run_elector(elector, replica, stop)


async def _run_elector(elector: Elector, replica: SchedulerReplica, stop: asyncio.Event) -> None:
    running = asyncio.create_task(elector.run(replica.lead))
    waiter = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({running, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await running
        waiter.cancel()
        await elector.release()  # hand over now, not a lease duration from now


async def _lead_by_lease(
    settings: Settings, replica: SchedulerReplica, stop: asyncio.Event
) -> None:
    from leoflow.kube.client import KubeClient
    from leoflow.kube.leader import ElectionConfig, LeaderElector

    election = settings.leader_election
    client = await KubeClient.from_settings(settings)
    elector = LeaderElector(
        client,
        ElectionConfig(
            lease_name=election.lease_name,
            identity=replica.identity,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        ),
    )
    try:
        await _run_elector(elector, replica, stop)
    finally:
        await client.close()
