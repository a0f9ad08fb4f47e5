"""One runtime: store, executor, agent endpoint and scheduler, opened and closed together.

Both Lite recipes (``leoflow run``, ``leoflow lite``) open one of these; Pro's
replica builds the same parts (``parts``) around its own leadership.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from leoflow.domain.execution import Executor
from leoflow.runtime.lease import LiteLease, claim_lease
from leoflow.runtime.parts import (
    AGENT_EXECUTORS,
    lite_identity,
    make_executor,
    scheduler_config,
    serve_agents,
    side_channels,
)
from leoflow.scheduler.core import Scheduler
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.settings import Settings
from leoflow.store import Store

Closer = Callable[[], Awaitable[None]]


class RunObserver(Protocol):
    """Follows the runs a scheduler drives (the terminal's progress view)."""

    def run_changed(self, run: RunMirror) -> None: ...

    def task_changed(self, run: RunMirror, ti: TaskMirror) -> None: ...


@dataclass
class Runtime:
    settings: Settings
    store: Store
    scheduler: Scheduler
    executor: Executor
    closers: list[Closer] = field(default_factory=list)
    # Lite's hold on the store's lease (None for `leoflow run`, which takes no office).
    lease: LiteLease | None = None

    def observe(self, observer: RunObserver) -> None:
        """Tell ``observer`` of every change to a run or a task instance of this scheduler."""
        self.scheduler.watch(on_task=observer.task_changed, on_run=observer.run_changed)

    async def close(self) -> None:
        await self.scheduler.stop()
        for closer in reversed(self.closers):
            await closer()
        await self.store.close()


async def open_runtime(
    settings: Settings,
    executor_name: str,
    *,
    solo: bool = False,
    executor: Executor | None = None,
) -> Runtime:
    """Store, agent endpoint (for agent-based executors), executor and scheduler.

    ``solo`` (``leoflow run``) drives only its own run and takes no office, so it
    can share the database with a running ``leoflow lite``. ``executor``, if given,
    is used instead of a new one (``leoflow run`` starts its agent before the store
    opens; the endpoint then serves on the address that agent was given).
    """
    settings.home.mkdir(parents=True, exist_ok=True)
    store = await Store.open(settings.resolved_database_url)
    closers: list[Closer] = []
    built: list[Scheduler] = []  # the scheduler, once it exists: the endpoint asks per call
    try:
        for name, slots in settings.pools.items():
            await store.upsert_pool(name, slots)
        pools = {p.name: p.slots for p in await store.list_pools()}
        lease = None if solo else await claim_lease(settings, store)
        if lease is not None:
            closers.append(lease.close)
        epoch = None if solo else await store.take_office(lite_identity(settings))
        endpoint = None
        if executor.uses_agent if executor is not None else executor_name in AGENT_EXECUTORS:
            service = await serve_agents(settings, store, lambda: built[0] if built else None)
            closers.append(service.close)
            endpoint = service.address
        if executor is None:
            executor = make_executor(settings, executor_name, agent_endpoint=endpoint)
        config = scheduler_config(settings, pools, solo=solo)
        scheduler = Scheduler(store, executor, config, epoch=epoch)
        side_channels(scheduler, settings)
        built.append(scheduler)
        await executor.warm()
    except BaseException:
        for closer in reversed(closers):
            await closer()
        await store.close()
        raise
    return Runtime(settings, store, scheduler, executor, closers, lease)
