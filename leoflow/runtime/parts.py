"""The parts a runtime is built from, each chosen from the settings.

One place decides which executor runs tasks, where secrets come from and how
the scheduler is configured, for Lite and Pro alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from leoflow.domain.execution import Executor
from leoflow.scheduler.agent_service import AgentService, start_agent_service
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.scheduler.lineage import Lineage
from leoflow.secrets import DirectorySecrets, SecretBackend
from leoflow.settings import Settings
from leoflow.store import Store

EXECUTORS = ("subprocess", "agent", "kubernetes", "docker")
# Executors whose tasks run under `leoflow agent`: they need the agent endpoint
# serving, and its address, before they launch anything.
AGENT_EXECUTORS = frozenset({"agent", "kubernetes", "docker"})
# Executors whose tasks run in images: a dbt task names its project where the image holds it.
IMAGE_EXECUTORS = frozenset({"kubernetes", "docker"})


def make_executor(settings: Settings, name: str, *, agent_endpoint: str | None = None) -> Executor:
    """The executor ``name``; ``agent_endpoint`` is the address its agents dial."""
    if name == "subprocess":
        from leoflow.executor.subprocess import SubprocessExecutor

        if settings.task_uids:  # never quietly run as root what was meant to run apart
            raise ValueError(
                "LEOFLOW_TASK_UIDS gives each task its own uid under the agent executor; "
                "the subprocess executor cannot (use --executor agent)"
            )
        return SubprocessExecutor(task_user=settings.task_user)
    if name == "agent":
        from leoflow.executor.local_agent import LocalAgentExecutor

        return LocalAgentExecutor(settings, agent_endpoint=agent_endpoint)
    if name == "kubernetes":
        from leoflow.kube.executor import KubernetesExecutor

        return KubernetesExecutor(settings, agent_endpoint=agent_endpoint)
    if name == "docker":
        from leoflow.executor.docker.executor import DockerExecutor

        return DockerExecutor(settings, agent_endpoint=agent_endpoint)
    raise ValueError(f"unknown executor {name!r} (expected one of: {', '.join(EXECUTORS)})")


def secret_backend(settings: Settings) -> SecretBackend:
    """Where ResolveSecret's values (and notification webhooks' secrets) come from:
    today a directory of files."""
    return DirectorySecrets(settings.resolved_secrets_dir)


def side_channels(scheduler: Scheduler, settings: Settings) -> None:
    """Give the scheduler what its webhooks and OpenLineage events need from the settings."""
    secrets = secret_backend(settings)
    scheduler.notifications.secrets = secrets
    scheduler.lineage = Lineage(settings.lineage)
    scheduler.lineage.secrets = secrets


async def serve_agents(
    settings: Settings, store: Store, scheduler: Callable[[], Scheduler | None]
) -> AgentService:
    """The agent endpoint; ``scheduler`` returns the one leading here now, if any."""
    return await start_agent_service(settings, store, scheduler, secret_backend(settings))


def lite_identity(settings: Settings) -> str:
    return settings.identity or f"lite-{os.getpid()}"


def scheduler_config(
    settings: Settings, pools: dict[str, int], *, solo: bool = False
) -> SchedulerConfig:
    return SchedulerConfig(
        parallelism=settings.parallelism,
        pools={**settings.pools, **pools},
        default_pool_slots=settings.default_pool_slots,
        poll_interval=settings.scheduler_poll_interval,
        heartbeat_timeout=settings.heartbeat_timeout,
        ticket_ttl=settings.ticket_ttl,
        identity=lite_identity(settings),
        solo=solo,
        max_catchup_runs=settings.max_catchup_runs,
        retention=settings.retention,
        removed_dag_grace=settings.removed_dag_grace,
    )
