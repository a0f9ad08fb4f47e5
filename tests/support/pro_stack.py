"""The leading scheduler of a Pro replica, assembled from the runtime's parts as
``leoflow.runtime.pro.SchedulerReplica.lead`` assembles it, with the kube client
the caller gives (the fake apiserver's; a benchmark's timed one) and without the
Lease (whose calls are leases, not pods: they do not touch the pod contract)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from leoflow.kube.client import KubeClient
from leoflow.kube.executor import KubernetesExecutor
from leoflow.runtime.heap import freeze_startup
from leoflow.runtime.parts import scheduler_config, secret_backend, serve_agents
from leoflow.scheduler.agent_service import AgentService
from leoflow.scheduler.core import Scheduler
from leoflow.settings import Settings
from leoflow.store import Store


@dataclass
class ProStack:
    scheduler: Scheduler
    executor: KubernetesExecutor
    service: AgentService


@contextlib.asynccontextmanager
async def pro_stack(
    settings: Settings, store: Store, client: KubeClient
) -> AsyncIterator[ProStack]:
    """Agent endpoint, executor and scheduler (in office, pod cache synced) until exit."""
    scheduler: Scheduler | None = None
    service = await serve_agents(settings, store, lambda: scheduler)
    try:
        executor = KubernetesExecutor(settings, client=client, agent_endpoint=service.address)
        epoch = await store.take_office(settings.identity or "pro-stack")
        pools = {p.name: p.slots for p in await store.list_pools()}
        scheduler = Scheduler(store, executor, scheduler_config(settings, pools), epoch=epoch)
        scheduler.notifications.secrets = secret_backend(settings)
        await scheduler.start()
        freeze_startup()
        try:
            assert executor.cache is not None
            assert await executor.cache.wait_synced(timeout=60), "the pod cache never synced"
            yield ProStack(scheduler, executor, service)
        finally:
            await scheduler.stop()
    finally:
        await service.close()


def chains_dag(dag_id: str, chains: int, depth: int) -> str:
    """``chains`` chains of ``depth`` tasks, each after the one before it: every launch
    but the first of each chain waits on an upstream's end."""
    lines = [f"dag_id: {dag_id}\nmax_active_tasks: {chains * depth}\ntasks:"]
    for c in range(chains):
        for d in range(depth):
            after = f", depends_on: [c{c:03d}_{d - 1:02d}]" if d else ""
            lines.append(f"  c{c:03d}_{d:02d}: {{command: 'true'{after}}}")
    return "\n".join(lines) + "\n"
