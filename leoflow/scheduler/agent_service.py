"""The scheduler's side of the agent protocol: the backend behind the gRPC endpoint.

Calls are answered from the scheduler's mirror where the task instance is
active here, so a heartbeat costs no database read; facts that change state
(started, finished) go through the scheduler loop and are durable before the
agent is answered.
"""

from __future__ import annotations

import logging
import secrets as _secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from leoflow.domain.execution import Executor, TaskFinished, TaskStarted
from leoflow.domain.states import TASK_TERMINAL, TaskState
from leoflow.scheduler.agent_endpoint import (
    AgentEndpoint,
    SessionRefused,
    StartSpec,
    TaskSession,
    TicketUse,
)
from leoflow.scheduler.core import Scheduler
from leoflow.secrets import DirectorySecrets, SecretBackend
from leoflow.settings import Settings
from leoflow.store import Store

log = logging.getLogger("leoflow.scheduler.agent")


def outcome_of(exit_code: int, oom_killed: bool, timed_out: bool) -> str:
    if oom_killed:
        return "oom"
    if timed_out:
        return "timeout"
    return "success" if exit_code == 0 else "exit_code"


class SchedulerBackend:
    """``AgentBackend`` over the scheduler's mirror, the store and a secret backend."""

    def __init__(self, scheduler: Scheduler, store: Store, secrets: SecretBackend) -> None:
        self._scheduler = scheduler
        self._store = store
        self._secrets = secrets
        self._clock = time.time

    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        use = await self._store.consume_ticket(ticket_hash, now)
        return TicketUse(use.status, use.ti_pk, use.try_number)

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        ti = self._scheduler.task(ti_pk)
        if ti is None or ti.try_number != try_number or ti.state in TASK_TERMINAL:
            return None
        if ti.state not in (TaskState.QUEUED, TaskState.RUNNING):
            return None
        run = self._scheduler.run_of(ti)
        if run is None:
            return None
        spec = run.spec.tasks[ti.task_id]
        return TaskSession(ti_pk, try_number, run.dag_id, run.run_id, ti.task_id, spec.secrets)

    async def start(self, s: TaskSession, *, executor_ref: str) -> StartSpec:
        await self._scheduler.submit(
            TaskStarted(s.ti_pk, s.try_number, executor_ref, self._clock())
        )
        ti = self._scheduler.task(s.ti_pk)
        if ti is None or ti.try_number != s.try_number or ti.state is not TaskState.RUNNING:
            raise SessionRefused("the task instance is no longer waiting for this try to start")
        run = self._scheduler.run_of(ti)
        assert run is not None
        spec = run.spec.tasks[ti.task_id]
        env = dict(spec.env)
        env.update(
            LEOFLOW_DAG_ID=s.dag_id,
            LEOFLOW_RUN_ID=s.run_id,
            LEOFLOW_TASK_ID=s.task_id,
            LEOFLOW_TRY_NUMBER=str(s.try_number),
        )
        return StartSpec(argv=spec.argv(), env=env, cwd="", timeout_seconds=spec.timeout)

    async def heartbeat(self, s: TaskSession) -> bool:
        return self._scheduler.heartbeat(s.ti_pk, s.try_number) is not None

    async def append_log(self, s: TaskSession, data: bytes) -> None:
        await self._store.append_log(s.ti_pk, s.try_number, data)

    async def complete(
        self, s: TaskSession, *, exit_code: int, oom_killed: bool, timed_out: bool, message: str
    ) -> None:
        reason = outcome_of(exit_code, oom_killed, timed_out)
        await self._scheduler.submit(
            TaskFinished(s.ti_pk, s.try_number, exit_code, reason, message, self._clock())
        )

    async def resolve_secret(self, s: TaskSession, name: str) -> str | None:
        return await self._secrets.get(name)


def signing_key(settings: Settings) -> bytes:
    """The configured key, or for a single process (Lite) a random one per start."""
    if settings.token_signing_key:
        return settings.token_signing_key.encode()
    return _secrets.token_bytes(32)


def dial_address(bound: str) -> str:
    """The address a local agent dials for a bound one (``0.0.0.0`` is not dialable)."""
    if bound.startswith("unix:"):
        return bound
    host, _, port = bound.rpartition(":")
    if host in ("0.0.0.0", "[::]", ""):
        host = "127.0.0.1"
    return f"{host}:{port}"


async def start_agent_service(
    settings: Settings, store: Store, scheduler: Scheduler, executor: Executor
) -> Callable[[], Awaitable[None]]:
    """Serve the agent endpoint for ``scheduler``; tell the executor where agents dial."""
    backend = SchedulerBackend(scheduler, store, DirectorySecrets(settings.resolved_secrets_dir))
    endpoint = AgentEndpoint(
        backend,
        signing_key(settings),
        heartbeat_interval=settings.heartbeat_interval,
    )
    bound = await endpoint.start(settings.agent_listen)
    target: Any = executor
    if hasattr(target, "agent_endpoint"):
        target.agent_endpoint = settings.agent_endpoint or dial_address(bound)
    log.info("agent endpoint listening on %s", bound)

    async def close() -> None:
        await endpoint.stop()

    return close
