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
from dataclasses import dataclass
from typing import Any

from leoflow.domain.assets.events import (
    ASSET_RUN_PREFIX,
    TRIGGERING_ENV,
    produced_events,
    triggering_json,
)
from leoflow.domain.backfill import run_env
from leoflow.domain.catalogue import parse_spec
from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.execution import TaskFinished, TaskStarted, context_env
from leoflow.domain.mapping import with_items
from leoflow.domain.outputs import OUTPUT_LIMIT, item_of, settle_output
from leoflow.domain.progress import end_of_try
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.scheduler.agent_backend import (
    Outcome,
    SessionRefused,
    StartSpec,
    TaskSession,
    TicketUse,
)
from leoflow.scheduler.agent_bounds import ConnectionBounds
from leoflow.scheduler.agent_endpoint import AgentEndpoint
from leoflow.scheduler.core import Scheduler, SchedulerStopping
from leoflow.scheduler.mirror import RunMirror
from leoflow.scheduler.outputs import mirror_inputs, stored_inputs
from leoflow.scheduler.ticket_batch import TicketBatcher
from leoflow.secrets import SecretBackend
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.asset_events import TaskAssetEvent
from leoflow.store.diskfull import StoreFull
from leoflow.store.rows import TaskChange

log = logging.getLogger("leoflow.scheduler.agent")


def outcome_of(outcome: Outcome) -> str:
    if outcome.not_started:
        return EndReason.LAUNCH_FAILED
    if outcome.oom_killed:
        return EndReason.OOM
    if outcome.timed_out:
        return EndReason.TIMEOUT
    return EndReason.SUCCESS if outcome.exit_code == 0 else EndReason.EXIT_CODE


class SchedulerBackend:
    """``AgentBackend`` for one replica.

    On the leader, calls are answered from the scheduler's mirror and state
    changes go through its loop. On any other replica (every one serves the
    endpoint, and an agent's connection sticks to whichever it reached) they are
    compare-and-set writes to the store, which the leader folds into its mirror
    on its next poll.
    """

    def __init__(
        self,
        scheduler: Callable[[], Scheduler | None],
        store: Store,
        secrets: SecretBackend,
    ) -> None:
        self._scheduler = scheduler
        self._store = store
        self._secrets = secrets
        self._clock = time.time
        self._specs: dict[str, tuple[str, DagSpec]] = {}
        self._tickets = TicketBatcher(store.consume_tickets)

    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        scheduler = self._scheduler()
        if scheduler is not None and scheduler.local_tickets is not None:
            local = scheduler.local_tickets.consume(ticket_hash, now)
            if local is not None:  # one of the tickets kept here (Lite's pool agent's)
                return local
        use = await self._tickets.consume(ticket_hash, now)
        return TicketUse(use.status, use.ti_pk, use.try_number)

    # ------------------------------------------------------------ leader path

    def _local(self, ti_pk: int) -> tuple[Scheduler, TaskSpec, str, str, RunMirror] | None:
        scheduler = self._scheduler()
        if scheduler is None:
            return None
        ti = scheduler.task(ti_pk)
        run = scheduler.run_of(ti) if ti is not None else None
        if ti is None or run is None:
            return None
        return scheduler, run.spec.tasks[ti.task_id], run.dag_id, run.run_id, run

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        local = self._local(ti_pk)
        if local is not None:
            scheduler, spec, dag_id, run_id, _ = local
            ti = scheduler.task(ti_pk)
            assert ti is not None
            if ti.try_number != try_number or ti.state not in _LIVE:
                return None
            return TaskSession(ti_pk, try_number, dag_id, run_id, ti.task_id, spec.secrets)
        row = await self._store.get_task_instance(ti_pk)
        if row is None or row.try_number != try_number or row.state not in _LIVE:
            return None
        task = await self._task_spec(row.dag_id, row.task_id, row)
        secrets = task.secrets if task is not None else ()
        return TaskSession(ti_pk, try_number, row.dag_id, row.run_id, row.task_id, secrets)

    async def start(self, s: TaskSession, *, executor_ref: str) -> StartSpec:
        now = self._clock()
        local = self._local(s.ti_pk)
        if local is not None:
            scheduler = local[0]
            if await self._submit(scheduler, TaskStarted(s.ti_pk, s.try_number, executor_ref, now)):
                ti = scheduler.task(s.ti_pk)
                if ti is None or ti.try_number != s.try_number or ti.state is not TaskState.RUNNING:
                    raise SessionRefused(
                        "the task instance is no longer waiting for this try to start"
                    )
                inputs = mirror_inputs(local[4], ti.task_id)
                return _start_spec(s, local[1], await self._run_env(s), inputs)
        task = await self._task_spec(s.dag_id, s.task_id, s.ti_pk)
        if task is None:
            raise SessionRefused("the task's DAG no longer defines it")
        started = await self._store.transition_task(
            s.ti_pk,
            TaskState.QUEUED,
            TaskState.RUNNING,
            epoch=None,
            expected_try=s.try_number,
            started_at=now,
            heartbeat_at=now,
            executor_ref=executor_ref,
        )
        if not started:
            row = await self._store.get_task_instance(s.ti_pk)
            resent = (
                row is not None
                and row.try_number == s.try_number
                and row.state is TaskState.RUNNING
                and row.executor_ref == executor_ref
            )
            if not resent:  # a Start resent after a lost reply finds its own try running
                raise SessionRefused("the task instance is no longer waiting for this try to start")
        inputs = await stored_inputs(self._store, s.ti_pk, task.depends_on)
        return _start_spec(s, task, await self._run_env(s), inputs)

    async def heartbeat(self, s: TaskSession) -> bool:
        scheduler = self._scheduler()
        if scheduler is not None and scheduler.task(s.ti_pk) is not None:
            return scheduler.heartbeat(s.ti_pk, s.try_number) is not None
        return not await self._store.heartbeat(s.ti_pk, s.try_number, self._clock())

    async def append_log(self, s: TaskSession, data: bytes) -> None:
        try:
            await self._store.append_log(s.ti_pk, s.try_number, data)
        except StoreFull as exc:  # the disk is full and Leoflow is stopping
            raise SessionRefused(f"Leoflow is stopping; output not written: {exc}") from exc

    async def log_size(self, s: TaskSession) -> int:
        return await self._store.log_size(s.ti_pk, s.try_number)

    async def complete(self, s: TaskSession, outcome: Outcome) -> None:
        now = self._clock()
        reason, message, output = settle_output(
            outcome_of(outcome), outcome.message, outcome.output, outcome.output_error
        )
        code = outcome.exit_code
        local = self._local(s.ti_pk)
        if local is not None and await self._submit(
            local[0], TaskFinished(s.ti_pk, s.try_number, code, reason, message, now, output)
        ):
            return
        row = await self._store.get_task_instance(s.ti_pk)
        if row is None or row.try_number != s.try_number or row.state not in _LIVE:
            raise SessionRefused("the task instance no longer accepts this try's outcome")
        task = await self._task_spec(s.dag_id, s.task_id, s.ti_pk)
        made: list[tuple[str, str | None]] = []
        if reason == EndReason.SUCCESS and task is not None and task.produces:
            made, problem = produced_events(task.produces, output)
            if problem:
                reason, message = EndReason.OUTPUT_INVALID, problem
        events = [
            TaskAssetEvent(s.ti_pk, s.try_number, s.dag_id, s.run_id, s.task_id, *e) for e in made
        ]
        tries: dict[str, Any] = {"try_number": row.try_number, "max_tries": row.max_tries}
        tries["retry_delay"] = task.retry_delay if task is not None else 0.0
        new, fields = end_of_try(reason, exit_code=code, message=message, at=now, **tries)
        if new is TaskState.SUCCESS:
            fields["output"] = output
        change = TaskChange(s.ti_pk, row.state, new, s.try_number, fields)
        done = await self._store.transition_task_with_events(change, events, epoch=None)
        if not done:
            raise SessionRefused("the task instance changed while its outcome was recorded")

    async def resolve_secret(self, s: TaskSession, name: str) -> str | None:
        return await self._secrets.get(name)

    async def _submit(self, scheduler: Scheduler, event: TaskStarted | TaskFinished) -> bool:
        """Through the leader's loop; False: it stepped down, so write as a follower."""
        try:
            await scheduler.submit(event)
        except SchedulerStopping as exc:
            if self._scheduler() is scheduler:
                # The whole process is stopping (Lite): a refusal the agent does not
                # retry; the try stays as the store has it and the next start runs it.
                raise SessionRefused(str(exc)) from exc
            return False  # it left office (Pro): the store path records it
        return True

    async def _run_env(self, s: TaskSession) -> dict[str, str]:
        """The run's logical date and data interval, and the asset events that triggered
        it, as the task's environment."""
        env = await self._dates_env(s)
        if s.run_id.startswith(ASSET_RUN_PREFIX):
            row = await self._store.find_run(s.dag_id, s.run_id)
            if row is not None and row.run_type == "asset":
                events = await self._store.run_asset_events(row.pk)
                env[TRIGGERING_ENV] = triggering_json([e.as_json() for e in events])
        return env

    async def _dates_env(self, s: TaskSession) -> dict[str, str]:
        scheduler = self._scheduler()
        ti = scheduler.task(s.ti_pk) if scheduler is not None else None
        run = scheduler.run_of(ti) if scheduler is not None and ti is not None else None
        if run is not None:
            return run_env(run.spec, run.logical_date)
        row = await self._store.find_run(s.dag_id, s.run_id)
        cached = self._specs.get(s.dag_id)
        if row is None or row.logical_date is None or cached is None:
            return {}
        return run_env(cached[1], row.logical_date)

    async def _task_spec(
        self, dag_id: str, task_id: str, ti: TaskInstance | int
    ) -> TaskSpec | None:
        dag = await self._store.get_dag(dag_id)
        if dag is None:
            return None
        cached = self._specs.get(dag_id)
        if cached is None or cached[0] != dag.spec_hash:
            cached = (dag.spec_hash, parse_spec(dag.spec_json))
            self._specs[dag_id] = cached
        task = cached[1].tasks.get(task_id)
        if task is None and item_of(task_id) is not None:
            # One item of a mapped task: the DAG names the task; its row holds the item.
            row = await self._store.get_task_instance(ti) if isinstance(ti, int) else ti
            task = with_items(cached[1], [row]).tasks.get(task_id) if row is not None else None
        return task


_LIVE = (TaskState.QUEUED, TaskState.RUNNING)


def _start_spec(
    s: TaskSession, spec: TaskSpec, run: dict[str, str], inputs: dict[str, str]
) -> StartSpec:
    env = {**spec.env, **run, **context_env(s.dag_id, s.run_id, s.task_id, s.try_number)}
    return StartSpec(spec.argv(), env, "", spec.timeout, inputs, OUTPUT_LIMIT)


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


@dataclass(frozen=True)
class AgentService:
    """The running endpoint: the address agents on this host dial, and how to stop it."""

    address: str
    close: Callable[[], Awaitable[None]]


async def start_agent_service(
    settings: Settings,
    store: Store,
    scheduler: Scheduler | Callable[[], Scheduler | None],
    secrets: SecretBackend,
) -> AgentService:
    """Serve the agent endpoint; the returned address is what agents dial.

    ``scheduler`` is this process's scheduler, or a callable returning the one
    leading here now (None on a replica that does not lead). ``secrets`` answers
    ResolveSecret (the runtime chooses the backend from the settings).
    """
    current = scheduler if callable(scheduler) else (lambda: scheduler)
    backend = SchedulerBackend(current, store, secrets)
    endpoint = AgentEndpoint(
        backend,
        signing_key(settings),
        heartbeat_interval=settings.heartbeat_interval,
        bounds=ConnectionBounds.from_settings(settings),
    )
    tls = None
    if settings.agent_tls_cert_file is not None and settings.agent_tls_key_file is not None:
        from leoflow.scheduler.tls import ReloadingCertificate

        tls = ReloadingCertificate(
            settings.agent_tls_cert_file, settings.agent_tls_key_file
        ).credentials()
    bound = await endpoint.start(settings.agent_listen, tls=tls)
    address = settings.agent_endpoint or dial_address(bound)
    log.info(
        "agent endpoint listening on %s (%s); agents dial %s",
        bound,
        "TLS" if tls is not None else "plaintext",
        address,
    )

    async def close() -> None:
        await endpoint.stop()

    return AgentService(address, close)
