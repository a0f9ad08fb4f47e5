"""The scheduler: one loop that turns events into committed state and launches.

Everything that changes a task instance goes through ``_tick``: executor and
agent events, timers (retries, timeouts, lost heartbeats), new runs. A tick
applies them to the mirror, writes the whole batch in one fenced transaction
(group commit: every event waiting on the tick is durable when its future
resolves), and only then launches what admission let through. A finished task
wakes the loop at once, so its downstream starts without waiting for a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from leoflow.domain.admission import Admission, Candidate, WaitReason
from leoflow.domain.backfill import run_env
from leoflow.domain.credentials import issue_ticket
from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.durations import format_duration
from leoflow.domain.execution import (
    Attempt,
    Executor,
    ExecutorEvent,
    Launch,
    LaunchError,
    LaunchWaiting,
    LogData,
    TaskFinished,
    TaskStarted,
)
from leoflow.domain.explain import LAUNCH_WAITING_REASONS
from leoflow.domain.progress import end_of_try, evaluate, final_state, waiting_on
from leoflow.domain.schedule import MAX_CATCHUP_RUNS, due_runs
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.scheduler.backfills import BackfillDriver
from leoflow.scheduler.deadlines import DeadlineWatch
from leoflow.scheduler.logbuffer import LogBuffer
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.scheduler.notifications import Notifications
from leoflow.scheduler.retention import Retention
from leoflow.store import Store
from leoflow.store.errors import RunExists, StaleEpoch
from leoflow.store.rows import RunRow, TaskChange, TaskSeed

log = logging.getLogger("leoflow.scheduler")

# A task may overrun its timeout by this much before the scheduler stops waiting
# for the executor to enforce it and fails the try itself.
TIMEOUT_BACKSTOP = 30.0


@dataclass(frozen=True)
class SchedulerConfig:
    parallelism: int = 32
    pools: Mapping[str, int] = field(default_factory=dict)
    default_pool_slots: int = 128
    poll_interval: float = 1.0
    heartbeat_timeout: float = 60.0
    ticket_ttl: float = 600.0
    identity: str = "leoflow"
    # A solo scheduler (``leoflow run``) drives only the runs it creates: it takes
    # no office, recovers nothing and adopts nothing from the store, so it can run
    # beside a long-running scheduler on the same database.
    solo: bool = False
    # Catching up creates at most this many runs of one DAG that wait queued; more
    # come as those start, so a far start_date never floods the store in a burst.
    max_catchup_runs: int = 100
    retention: float | None = None  # seconds; see scheduler/retention.py


LOCAL_RUN_TYPE = "local"


class LeadershipLost(Exception):
    """A fenced write was refused: another scheduler leads now."""


class SchedulerStopping(Exception):
    """The scheduler is stopping: it records nothing more. A try still running is
    left as it is in the store, and the next start retries it without spending a
    retry (see ``_recover``)."""


@dataclass
class _Pending:
    event: ExecutorEvent | None
    done: asyncio.Future[None] | None


class Scheduler:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        config: SchedulerConfig = SchedulerConfig(),
        *,
        epoch: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.executor = executor
        self.config = config
        self.epoch = epoch
        self._clock = clock
        self.admission = Admission(
            config.parallelism, dict(config.pools), config.default_pool_slots
        )
        self.dags: dict[str, DagSpec] = {}
        self.paused: set[str] = set()
        self.runs: dict[int, RunMirror] = {}
        self._by_pk: dict[int, TaskMirror] = {}
        self._events: list[_Pending] = []
        self._ticking: list[_Pending] = []  # the events the current tick is applying
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._run_waiters: dict[int, list[asyncio.Future[RunRow]]] = {}
        self._logs = LogBuffer(store)
        self.retention = Retention(store, None if config.solo else config.retention)
        self._last_poll = 0.0
        self._spec_hashes: dict[str, str] = {}
        self._cron_due: dict[str, float] = {}
        self._started_at = clock()
        self._catchup_capped: set[str] = set()
        self._pools: dict[str, int] = dict(config.pools)
        self._stopping = False
        self.on_task_change: Callable[[RunMirror, TaskMirror], None] | None = None
        self.on_run_change: Callable[[RunMirror], None] | None = None
        self.failure: BaseException | None = None
        # The tries that were live when stop() began: their processes are killed, and
        # the next start runs them again.
        self.interrupted: list[TaskMirror] = []
        self._backfills = BackfillDriver(self)
        self._deadlines = DeadlineWatch(self)
        # Webhooks; the runtime gives it the secrets backend (leoflow/lite.py, pro.py).
        self.notifications = Notifications()

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self.executor.start(self.report)
        if not self.config.solo:
            await self._sync_definitions()
            await self._recover()
        self._logs.start()
        self._loop_task = asyncio.create_task(self._loop(), name="leoflow-scheduler-loop")
        self.retention.start()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        await self.retention.stop()
        self.interrupted = [
            ti for ti in self._by_pk.values() if ti.state in (TaskState.QUEUED, TaskState.RUNNING)
        ]
        self._wakeup.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            # A loop that died has its error in self.failure; stop the executor anyway.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        # Agents whose Start or Complete waits on the loop get a refusal at once
        # rather than an answer that never comes (which held Lite's exit 15 s).
        self._fail_waiters(SchedulerStopping("Leoflow is stopping"))
        await self.executor.stop()
        for task in list(self._background):
            task.cancel()
        await self._logs.stop()
        await self.notifications.stop()

    def register_dags(self, dags: Mapping[str, DagSpec], paused: set[str] | None = None) -> None:
        for dag_id, spec in dags.items():
            if self.dags.get(dag_id) != spec:
                self._cron_due.pop(dag_id, None)  # a new schedule: work out its next fire again
        self.dags = dict(dags)
        if paused is not None:
            self.paused = set(paused)
        for dag_id, spec in self.dags.items():
            self.admission.set_dag_limit(dag_id, spec.max_active_tasks)
        self._wakeup.set()

    def wake(self) -> None:
        """Look at the store now rather than at the next poll (another writer changed it)."""
        self._last_poll = 0.0
        self._wakeup.set()

    def set_pool(self, name: str, slots: int) -> None:
        self.admission.set_pool(name, slots)
        self._wakeup.set()

    # -------------------------------------------------------------------- events

    def report(self, event: ExecutorEvent) -> None:
        """Executor callback: queue the event for the next tick."""
        if isinstance(event, LogData):
            self._logs.add(event.ti_pk, event.try_number, event.data)
            return
        self._events.append(_Pending(event, None))
        self._wakeup.set()

    async def submit(self, event: ExecutorEvent) -> None:
        """Queue an event and wait until its effect is committed."""
        if isinstance(event, LogData):
            await self.store.append_log(event.ti_pk, event.try_number, event.data)
            return
        if self._stopping:
            raise SchedulerStopping("Leoflow is stopping")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._events.append(_Pending(event, done))
        self._wakeup.set()
        await done

    async def trigger(
        self,
        dag_id: str,
        *,
        conf: dict[str, Any] | None = None,
        run_id: str | None = None,
        logical_date: float | None = None,
        run_type: str = "manual",
    ) -> RunRow:
        """Create a run of a registered DAG; it starts as soon as max_active_runs allows."""
        spec = self.dags.get(dag_id)
        if spec is None:
            raise KeyError(f"unknown DAG {dag_id!r}")
        if self.config.solo:
            run_type = LOCAL_RUN_TYPE
        now = self._clock()
        if run_id is None:
            stamp = datetime.fromtimestamp(logical_date or now, UTC).isoformat(timespec="seconds")
            suffix = "" if run_type == "scheduled" else "_" + uuid.uuid4().hex[:6]
            run_id = f"{run_type}__{stamp}{suffix}"
        seeds = [
            TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
            for t in spec.tasks.values()
        ]
        row = await self.store.create_run(
            dag_id,
            run_id,
            run_type=run_type,
            logical_date=logical_date,
            conf=conf or {},
            tasks=seeds,
            epoch=self.epoch,
        )
        tis = await self.store.list_task_instances(run_pk=row.pk)
        # The loop may have picked the new run up from the store while we awaited;
        # its mirror may already be ahead of these rows.
        if row.pk not in self.runs:
            self._adopt_run(row, spec, tis)
        self._wakeup.set()
        return row

    async def join(self) -> None:
        """Until the loop stops; re-raises what stopped it (LeadershipLost, say)."""
        if self._loop_task is not None:
            await asyncio.shield(self._loop_task)

    async def wait_run(self, run_pk: int) -> RunRow:
        """Wait until the run is terminal."""
        mirror = self.runs.get(run_pk)
        if mirror is None:
            row = await self.store.get_run(run_pk)
            if row is None:
                raise KeyError(f"no run {run_pk}")
            if row.state in RUN_TERMINAL:
                return row
        future: asyncio.Future[RunRow] = asyncio.get_running_loop().create_future()
        self._run_waiters.setdefault(run_pk, []).append(future)
        loop_task = self._loop_task
        if loop_task is None:
            return await future
        waiting: set[asyncio.Future[Any]] = {future, loop_task}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            return future.result()
        if loop_task.cancelled():
            raise RuntimeError("the scheduler loop was cancelled")
        loop_task.result()  # re-raises what stopped the loop
        raise RuntimeError("the scheduler loop stopped")

    def task(self, ti_pk: int) -> TaskMirror | None:
        return self._by_pk.get(ti_pk)

    def run_of(self, ti: TaskMirror) -> RunMirror | None:
        return self.runs.get(ti.run_pk)

    def heartbeat(self, ti_pk: int, try_number: int) -> str | None:
        """Record an agent heartbeat; return a cancel reason if the task should stop."""
        ti = self._by_pk.get(ti_pk)
        if ti is None or ti.try_number != try_number:
            return "this try is no longer current"
        ti.heartbeat_at = self._clock()
        return ti.cancel_requested

    def why(self, ti_pk: int) -> str | None:
        """Why a task instance is not running yet, in one sentence with the numbers."""
        ti = self._by_pk.get(ti_pk)
        if ti is None:
            return None
        run = self.runs[ti.run_pk]
        if run.state is RunState.QUEUED:
            running = sum(
                1
                for r in self.runs.values()
                if r.dag_id == run.dag_id and r.state is RunState.RUNNING
            )
            return (
                f"run {run.run_id} is queued: DAG {run.dag_id} has {running} of "
                f"{run.spec.max_active_runs} max_active_runs running"
            )
        if ti.state is TaskState.NONE:
            ups = waiting_on(run.spec, ti.task_id, run.states())
            return (
                "waiting for upstream task(s) " + ", ".join(ups) if ups else "about to be scheduled"
            )
        if ti.state is TaskState.UP_FOR_RETRY and ti.next_retry_at is not None:
            left = max(0.0, ti.next_retry_at - self._clock())
            return f"up for retry {ti.try_number + 1} of {ti.max_tries} in {format_duration(left)}"
        if ti.state is TaskState.SCHEDULED:
            reason: WaitReason | None = self.admission.why(ti.pk)
            if reason is not None:
                return reason.message
            return "admitted; launching"
        if ti.state is TaskState.QUEUED and ti.reason in LAUNCH_WAITING_REASONS:
            return ti.message
        return None

    def request_cancel(self, ti_pk: int, reason: str) -> None:
        ti = self._by_pk.get(ti_pk)
        if ti is not None and ti.state not in TASK_TERMINAL:
            ti.cancel_requested = reason
            self._wakeup.set()

    # ---------------------------------------------------------------------- loop

    async def _loop(self) -> None:
        try:
            while not self._stopping:
                timeout = self._next_deadline() - self._clock()
                if timeout > 0 and not self._events:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), timeout)
                self._wakeup.clear()
                await self._tick()
        except StaleEpoch as exc:
            metrics.STALE_WRITES.inc()
            log.error("leadership lost: %s; stopping the scheduler loop", exc)
            self.failure = LeadershipLost(str(exc))
            self._fail_waiters(self.failure)
            raise self.failure from exc
        except BaseException as exc:
            self.failure = exc
            stopping = self._stopping and isinstance(exc, asyncio.CancelledError)
            self._fail_waiters(SchedulerStopping("Leoflow is stopping") if stopping else exc)
            raise

    def _fail_waiters(self, exc: BaseException) -> None:
        for pending in [*self._ticking, *self._events]:
            if pending.done is not None and not pending.done.done():
                pending.done.set_exception(exc)
        self._events.clear()

    def _next_deadline(self) -> float:
        deadline = self._clock() + self.config.poll_interval
        for ti in self._by_pk.values():
            if ti.state is TaskState.UP_FOR_RETRY and ti.next_retry_at is not None:
                deadline = min(deadline, ti.next_retry_at)
        return deadline

    async def _tick(self) -> None:
        now = self._clock()
        # Read the store while the mirror still equals what is committed: between
        # here and the flush below the mirror runs ahead of the store.
        if now - self._last_poll >= self.config.poll_interval:
            self._last_poll = now
            await self._poll_store()
        await self._deadlines.check(now)
        pending, self._events = self._events, []
        self._ticking = pending
        batch = _Batch()
        finished_keys = [
            (p.event.ti_pk, p.event.try_number)
            for p in pending
            if isinstance(p.event, TaskFinished)
        ]
        if finished_keys:
            await self._logs.flush(finished_keys)
        for item in pending:
            if item.event is not None:
                self._apply(item.event, batch)
        self._timers(now, batch)
        self._start_runs(now, batch)
        for run in list(self.runs.values()):
            if run.dirty:
                self._advance(run, now, batch)
        self._admit(now, batch)
        self._finish_runs(now, batch)
        deliveries = self.notifications.collect(batch, self.runs, now)
        try:
            await self._flush(batch)
        except BaseException as exc:
            for item in pending:
                if item.done is not None and not item.done.done():
                    item.done.set_exception(exc)
            raise
        for item in pending:
            if item.done is not None and not item.done.done():
                item.done.set_result(None)
        self.notifications.emit(deliveries)
        for launch in batch.launches:
            self._spawn(self._launch(launch))
        for ti_pk, try_number, reason in batch.cancels:
            self._spawn(self.executor.cancel(ti_pk, try_number, reason))
        for run in batch.finished_runs:
            self._resolve_waiters(run)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -------------------------------------------------------------- transitions

    def _move(self, ti: TaskMirror, new: TaskState, batch: _Batch, **fields: Any) -> None:
        """Change a task instance in the mirror and add the CAS write to the batch."""
        batch.changes.append(TaskChange(ti.pk, ti.state, new, ti.try_number, fields))
        batch.touched.append(ti)
        ti.state = new
        for name, value in fields.items():
            setattr(ti, name, value)
        run = self.runs[ti.run_pk]
        run.dirty = True
        if self.on_task_change is not None:
            self.on_task_change(run, ti)

    def _apply(self, event: ExecutorEvent, batch: _Batch) -> None:
        ti = self._by_pk.get(event.ti_pk)
        if ti is None or ti.try_number != event.try_number:
            log.info("ignoring %s for a try that is not current", type(event).__name__)
            return
        if isinstance(event, TaskStarted):
            if ti.state is TaskState.QUEUED:
                self._move(
                    ti,
                    TaskState.RUNNING,
                    batch,
                    started_at=event.at,
                    heartbeat_at=event.at,
                    executor_ref=event.executor_ref,
                )
                metrics.RUNNING.inc()
        elif isinstance(event, TaskFinished):
            self._finish_try(ti, event.reason, event.message, event.exit_code, event.at, batch)
        elif (
            isinstance(event, LaunchWaiting)
            and ti.state is TaskState.QUEUED
            and (ti.reason, ti.message) != (event.reason, event.message)
        ):
            # A note only: the try stays queued and keeps its slot (see the executor).
            ti.reason, ti.message = event.reason, event.message
            batch.notes.append((ti.pk, ti.try_number, event.reason, event.message))

    def _finish_try(
        self,
        ti: TaskMirror,
        reason: str,
        message: str,
        exit_code: int | None,
        at: float,
        batch: _Batch,
    ) -> None:
        if ti.state not in (TaskState.QUEUED, TaskState.RUNNING):
            return
        was_running = ti.state is TaskState.RUNNING
        if ti.cancel_requested and reason != "success":
            reason = "cancelled"
        spec = self.runs[ti.run_pk].spec.tasks.get(ti.task_id)
        new, fields = end_of_try(
            reason,
            try_number=ti.try_number,
            max_tries=ti.max_tries,
            retry_delay=spec.retry_delay if spec is not None else 0.0,
            exit_code=exit_code,
            message=message,
            at=at,
            declared_tries=spec.max_tries if spec is not None else None,
        )
        self._move(ti, new, batch, **fields)
        if was_running:
            metrics.RUNNING.dec()
        self.admission.release(ti.pk)
        metrics.TASKS_FINISHED.labels(state=new.value).inc()

    def _timers(self, now: float, batch: _Batch) -> None:
        for ti in list(self._by_pk.values()):
            if ti.state is TaskState.UP_FOR_RETRY:
                if ti.next_retry_at is None or ti.next_retry_at <= now:
                    self._move(ti, TaskState.SCHEDULED, batch, ready_at=now, next_retry_at=None)
                    self._offer(ti)
            elif ti.state is TaskState.RUNNING:
                self._check_running(ti, now, batch)
            elif ti.cancel_requested and ti.state in (TaskState.NONE, TaskState.SCHEDULED):
                self.admission.withdraw(ti.pk)
                self._move(
                    ti,
                    TaskState.FAILED,
                    batch,
                    ended_at=now,
                    reason="cancelled",
                    message=f"cancelled before it started: {ti.cancel_requested}",
                )

    def _check_running(self, ti: TaskMirror, now: float, batch: _Batch) -> None:
        run = self.runs[ti.run_pk]
        spec = run.spec.tasks.get(ti.task_id)
        if ti.cancel_requested and not ti.cancel_sent:
            batch.cancels.append((ti.pk, ti.try_number, ti.cancel_requested))
            ti.cancel_sent = True
        if (
            spec is not None
            and spec.timeout is not None
            and ti.started_at is not None
            and now - ti.started_at > spec.timeout + TIMEOUT_BACKSTOP
        ):
            batch.cancels.append((ti.pk, ti.try_number, "timed out"))
            self._finish_try(
                ti,
                "timeout",
                f"timed out after {format_duration(spec.timeout)}; the executor did not stop "
                f"it, so the scheduler failed the try",
                None,
                now,
                batch,
            )
            return
        if (
            self.executor.uses_agent
            and ti.heartbeat_at is not None
            and now - ti.heartbeat_at > self.config.heartbeat_timeout
        ):
            batch.cancels.append((ti.pk, ti.try_number, "no heartbeat"))
            self._finish_try(
                ti,
                "lost",
                f"no heartbeat from the task's agent for {format_duration(now - ti.heartbeat_at)} "
                f"(limit {format_duration(self.config.heartbeat_timeout)}); the agent or its "
                "host is gone",
                None,
                now,
                batch,
            )

    def _candidate(self, ti: TaskMirror) -> Candidate:
        run = self.runs[ti.run_pk]
        spec = run.spec.tasks[ti.task_id]
        return Candidate(
            key=ti.pk,
            dag_id=run.dag_id,
            pool=spec.pool,
            pool_slots=spec.pool_slots,
            priority=spec.priority,
            run_order=run.created_at,
            ready_order=ti.ready_at or 0.0,
        )

    def _offer(self, ti: TaskMirror) -> None:
        self.admission.offer(self._candidate(ti))

    def _hold(self, ti: TaskMirror) -> None:
        """A try that already holds its slots (adopted after a restart)."""
        self.admission.hold(self._candidate(ti))

    def _start_runs(self, now: float, batch: _Batch) -> None:
        queued = sorted(
            (r for r in self.runs.values() if r.state is RunState.QUEUED),
            key=lambda r: (r.created_at, r.pk),
        )
        if not queued:
            return
        running: dict[str, int] = {}
        for run in self.runs.values():
            if run.state is RunState.RUNNING:
                running[run.dag_id] = running.get(run.dag_id, 0) + 1
        for run in queued:
            if run.dag_id in self.paused:
                continue  # a paused DAG's runs wait, queued, until it is unpaused
            if running.get(run.dag_id, 0) < run.spec.max_active_runs:
                running[run.dag_id] = running.get(run.dag_id, 0) + 1
                batch.run_changes.append(
                    (run, RunState.QUEUED, RunState.RUNNING, {"started_at": now})
                )
                run.state = RunState.RUNNING
                run.started_at = now
                run.dirty = True
                if self.on_run_change is not None:
                    self.on_run_change(run)

    def _advance(self, run: RunMirror, now: float, batch: _Batch) -> None:
        run.dirty = False
        if run.state is not RunState.RUNNING:
            return
        readiness = evaluate(run.spec, run.order, run.states())
        for task_id, failed_upstreams in readiness.upstream_failed:
            ti = run.tasks[task_id]
            self._move(
                ti,
                TaskState.UPSTREAM_FAILED,
                batch,
                ended_at=now,
                reason="upstream_failed",
                message="upstream failed: " + ", ".join(failed_upstreams),
            )
        for task_id, deciding in readiness.skipped:
            rule = run.spec.tasks[task_id].trigger_rule
            self._move(
                run.tasks[task_id],
                TaskState.SKIPPED,
                batch,
                ended_at=now,
                reason="skipped",
                message=f"trigger rule {rule} can no longer be met: " + ", ".join(deciding),
            )
        for task_id in readiness.ready:
            ti = run.tasks[task_id]
            self._move(ti, TaskState.SCHEDULED, batch, ready_at=now)
            self._offer(ti)

    def _admit(self, now: float, batch: _Batch) -> None:
        for candidate in self.admission.admit():
            ti = self._by_pk.get(candidate.key)
            if ti is None or ti.state is not TaskState.SCHEDULED:
                self.admission.release(candidate.key)
                continue
            run = self.runs[ti.run_pk]
            new_try = ti.try_number + 1
            batch.changes.append(
                TaskChange(
                    ti.pk,
                    TaskState.SCHEDULED,
                    TaskState.QUEUED,
                    ti.try_number,
                    {"try_number": new_try, "queued_at": now},
                )
            )
            batch.touched.append(ti)
            ti.state = TaskState.QUEUED
            ti.try_number = new_try
            ti.queued_at = now
            if ti.ready_at is not None:
                metrics.DISPATCH_LATENCY.observe(max(0.0, now - ti.ready_at))
            if self.on_task_change is not None:
                self.on_task_change(run, ti)
            batch.launches.append(self._make_launch(run, ti, batch))
            metrics.ADMITTED.inc()
        metrics.observe_admission(self.admission)

    def _make_launch(self, run: RunMirror, ti: TaskMirror, batch: _Batch) -> Launch:
        spec = run.spec.tasks[ti.task_id]
        ticket = None
        if self.executor.uses_agent:
            ticket, ticket_hash = issue_ticket()
            batch.tickets.append((ticket_hash, ti.pk, ti.try_number))
        return Launch(
            ti_pk=ti.pk,
            try_number=ti.try_number,
            dag_id=run.dag_id,
            run_id=run.run_id,
            task_id=ti.task_id,
            spec=spec,
            ticket=ticket,
            env=run_env(run.spec, run.logical_date),
        )

    async def _launch(self, launch: Launch) -> None:
        try:
            await self.executor.launch(launch)
        except LaunchError as exc:
            self.report(
                TaskFinished(
                    launch.ti_pk, launch.try_number, None, "launch_failed", str(exc), self._clock()
                )
            )
        except Exception as exc:
            log.exception("launching %s.%s failed", launch.dag_id, launch.task_id)
            self.report(
                TaskFinished(
                    launch.ti_pk,
                    launch.try_number,
                    None,
                    "launch_failed",
                    f"launch failed: {type(exc).__name__}: {exc}",
                    self._clock(),
                )
            )

    def _finish_runs(self, now: float, batch: _Batch) -> None:
        for run in list(self.runs.values()):
            if run.state is not RunState.RUNNING:
                continue
            outcome = final_state(run.spec, run.states())
            if outcome is None:
                continue
            failed = [t for t, ti in run.tasks.items() if ti.state is TaskState.FAILED]
            message = "failed tasks: " + ", ".join(sorted(failed)) if failed else None
            batch.run_changes.append(
                (run, RunState.RUNNING, outcome, {"ended_at": now, "message": message})
            )
            run.state = outcome
            batch.finished_runs.append(run)
            if self.on_run_change is not None:
                self.on_run_change(run)

    async def _flush(self, batch: _Batch) -> None:
        if batch.changes or batch.tickets:
            results = await self.store.transition_tasks(
                batch.changes,
                epoch=self.epoch,
                tickets=batch.tickets,
                tickets_expire_at=self._clock() + self.config.ticket_ttl,
            )
            stale = {
                change.ti_pk for change, ok in zip(batch.changes, results, strict=True) if not ok
            }
            if stale:
                await self._reconcile(stale, batch)
        for ti_pk, try_number, reason, message in batch.notes:
            await self.store.note_queued(ti_pk, try_number, reason, message, epoch=self.epoch)
        for run, expected, new, fields in batch.run_changes:
            ok = await self.store.transition_run(run.pk, expected, new, epoch=self.epoch, **fields)
            if not ok:
                log.warning(
                    "run %s changed under us (%s -> %s lost); reloading", run.run_id, expected, new
                )
                await self._reload_run(run.pk)
        for run in batch.finished_runs:
            self._forget_run(run)

    async def _reconcile(self, stale: set[int], batch: _Batch) -> None:
        """Some CAS writes lost a race: reload those runs and drop their launches."""
        runs = {self._by_pk[pk].run_pk for pk in stale if pk in self._by_pk}
        log.warning(
            "%d task instance write(s) lost a race; reloading %d run(s)", len(stale), len(runs)
        )
        batch.launches = [launch for launch in batch.launches if launch.ti_pk not in stale]
        for run_pk in runs:
            await self._reload_run(run_pk)

    # ------------------------------------------------------------- store reads

    def _adopt_run(self, row: RunRow, spec: DagSpec, tis: list[Any]) -> RunMirror:
        present = {ti.task_id for ti in tis}
        spec = _spec_for_tasks(spec, present)
        mirror = RunMirror.build(row, spec, tis)
        old = self.runs.get(row.pk)
        if old is not None:
            for ti in old.tasks.values():
                self._by_pk.pop(ti.pk, None)
        self.runs[row.pk] = mirror
        for ti in mirror.tasks.values():
            self._by_pk[ti.pk] = ti
        self.admission.set_dag_limit(row.dag_id, spec.max_active_tasks)
        return mirror

    async def reload_run(self, run_pk: int) -> None:
        """Take the run as the store has it now (a collaborator changed it there)."""
        await self._reload_run(run_pk)

    async def _reload_run(self, run_pk: int) -> None:
        row = await self.store.get_run(run_pk)
        old = self.runs.get(run_pk)
        if row is None or old is None:
            return
        if row.state in RUN_TERMINAL and old.state not in RUN_TERMINAL:
            await self._abandon_run(old, row.message or f"the run was marked {row.state}")
        tis = await self.store.list_task_instances(run_pk=run_pk)
        for ti in old.tasks.values():
            if ti.state is TaskState.SCHEDULED:
                self.admission.withdraw(ti.pk)
        mirror = self._adopt_run(row, old.spec, tis)
        for ti in mirror.tasks.values():
            if ti.state is TaskState.SCHEDULED:
                self._offer(ti)
        if row.state in RUN_TERMINAL:
            self._forget_run(mirror)
            self._resolve_waiters(mirror)

    def _catchup_room(self, dag_id: str) -> int:
        queued = sum(
            1 for r in self.runs.values() if r.dag_id == dag_id and r.state is RunState.QUEUED
        )
        return max(0, self.config.max_catchup_runs - queued)

    def _within_catchup_cap(self, dag_id: str, fires: list[float], room: int) -> list[float]:
        """The fire times to create now; says once when the cap holds some back."""
        if len(fires) <= room:
            if dag_id in self._catchup_capped:
                self._catchup_capped.discard(dag_id)
                log.info("DAG %s has caught up: no scheduled run is held back", dag_id)
            return fires
        if dag_id not in self._catchup_capped:
            self._catchup_capped.add(dag_id)
            log.warning(
                "DAG %s: catchup owes more runs than the cap allows; it keeps at most %d "
                "queued and creates the next as those start (catchup from %s). Raise "
                "max_catchup_runs (LEOFLOW_MAX_CATCHUP_RUNS) or set a later start_date "
                "to change this",
                dag_id,
                self.config.max_catchup_runs,
                datetime.fromtimestamp(fires[0], UTC).isoformat(timespec="seconds"),
            )
        return fires[:room]

    async def _create_due_runs(self) -> None:
        """Cron: create the runs whose time has come (one per DAG unless catching up)."""
        now = self._clock()
        for dag_id, spec in list(self.dags.items()):
            if spec.schedule is None or dag_id in self.paused:
                continue
            due = self._cron_due.get(dag_id)
            if due is not None and due > now:
                continue  # the next fire time is known and still ahead
            last = await self.store.last_scheduled_run(dag_id)
            last_date = last.logical_date if last is not None else None
            room = self._catchup_room(dag_id) if spec.catchup else MAX_CATCHUP_RUNS
            fires = due_runs(spec, last_date, now, self._started_at, limit=room + 1)
            for logical_date in self._within_catchup_cap(dag_id, fires, room):
                try:
                    row = await self.trigger(
                        dag_id, logical_date=logical_date, run_type="scheduled"
                    )
                except RunExists:
                    continue  # another scheduler (or an earlier term of ours) made it
                log.info("created scheduled run %s of %s", row.run_id, dag_id)
                last_date = logical_date
            cron = spec.cron()
            base = max(last_date or self._started_at, self._started_at if not spec.catchup else 0.0)
            upcoming = cron.next_after(datetime.fromtimestamp(base, UTC)) if cron else None
            self._cron_due[dag_id] = upcoming.timestamp() if upcoming else float("inf")

    async def _fold_in_agent_writes(self) -> None:
        """Apply what other replicas' agent endpoints wrote for tries we think are live.

        Those writes are already durable, so they change only the mirror: a try
        that started elsewhere is running here too, one that ended frees its slots
        and lets its downstream go.
        """
        live = [
            ti for ti in self._by_pk.values() if ti.state in (TaskState.QUEUED, TaskState.RUNNING)
        ]
        if not live:
            return
        for row in await self.store.get_task_instances([ti.pk for ti in live]):
            ti = self._by_pk.get(row.pk)
            if ti is None or row.try_number != ti.try_number:
                continue
            if row.heartbeat_at is not None and (ti.heartbeat_at or 0.0) < row.heartbeat_at:
                ti.heartbeat_at = row.heartbeat_at
            if row.state is ti.state:
                continue
            run = self.runs[ti.run_pk]
            was_running = ti.state is TaskState.RUNNING
            if row.state is TaskState.RUNNING:
                metrics.RUNNING.inc()
            elif row.state not in (TaskState.QUEUED, TaskState.RUNNING):
                self.admission.release(ti.pk)
                if was_running:
                    metrics.RUNNING.dec()
                metrics.TASKS_FINISHED.labels(state=row.state.value).inc()
            ti.state = row.state
            for name in (
                "started_at",
                "ended_at",
                "next_retry_at",
                "executor_ref",
                "exit_code",
                "reason",
                "message",
            ):
                setattr(ti, name, getattr(row, name))
            run.dirty = True
            if self.on_task_change is not None:
                self.on_task_change(run, ti)

    async def _abandon_run(self, run: RunMirror, why: str) -> None:
        """Another process ended the run (an API cancel): stop and fail what is left."""
        now = self._clock()
        batch = _Batch()
        for ti in run.tasks.values():
            if ti.state in TASK_TERMINAL:
                continue
            if ti.state in (TaskState.QUEUED, TaskState.RUNNING):
                batch.cancels.append((ti.pk, ti.try_number, why))
                self.admission.release(ti.pk)
                if ti.state is TaskState.RUNNING:
                    metrics.RUNNING.dec()
            elif ti.state is TaskState.SCHEDULED:
                self.admission.withdraw(ti.pk)
            self._move(
                ti,
                TaskState.FAILED,
                batch,
                ended_at=now,
                reason="cancelled",
                message=f"cancelled: {why}",
            )
        results = await self.store.transition_tasks(batch.changes, epoch=self.epoch)
        if not all(results):
            log.warning("some task instances of run %s changed while it was cancelled", run.run_id)
        for ti_pk, try_number, reason in batch.cancels:
            self._spawn(self.executor.cancel(ti_pk, try_number, reason))

    async def _sync_definitions(self) -> None:
        """DAG specs, paused flags and pools as the store has them (the API writes there)."""
        dags = await self.store.list_dags()
        known = {dag_id: spec for dag_id, spec in self.dags.items()}
        fresh: dict[str, DagSpec] = {}
        for row in dags:
            if not row.active:
                continue
            current = self._spec_hashes.get(row.dag_id)
            if current == row.spec_hash and row.dag_id in known:
                fresh[row.dag_id] = known[row.dag_id]
                continue
            try:
                fresh[row.dag_id] = DagSpec.model_validate_json(row.spec_json)
            except ValueError:
                log.exception(
                    "stored spec of DAG %s does not load; keeping the last good one", row.dag_id
                )
                if row.dag_id in known:
                    fresh[row.dag_id] = known[row.dag_id]
                continue
            self._spec_hashes[row.dag_id] = row.spec_hash
        self.register_dags(fresh, {row.dag_id for row in dags if row.paused})
        for pool in await self.store.list_pools():
            if self._pools.get(pool.name) != pool.slots:
                self._pools[pool.name] = pool.slots
                self.admission.set_pool(pool.name, pool.slots)

    async def _poll_store(self) -> None:
        """Follow what other processes wrote: new runs (API triggers, cleared runs),
        runs that ended under us (API cancels), DAG definitions and pools."""
        if self.config.solo:
            return
        await self._sync_definitions()
        await self._create_due_runs()
        await self._backfills.advance()
        await self._fold_in_agent_writes()
        rows = await self.store.list_runs(states=[RunState.QUEUED, RunState.RUNNING], limit=10_000)
        active = {row.pk for row in rows}
        for run_pk in [pk for pk in self.runs if pk not in active]:
            await self._reload_run(run_pk)
        for row in rows:
            if row.pk in self.runs or row.run_type == LOCAL_RUN_TYPE:
                continue
            spec = self.dags.get(row.dag_id)
            if spec is None:
                continue
            tis = await self.store.list_task_instances(run_pk=row.pk)
            if row.pk not in self.runs:  # trigger() may have adopted it meanwhile
                self._adopt_run(row, spec, tis)

    async def _recover(self) -> None:
        """Resume what a previous scheduler left: active runs and their task instances.

        A try that was queued but never started is queued again with the same try
        number. A try that was running when its scheduler stopped is lost: it is
        retried without using up one of the task's retries, because the failure
        was not the task's.
        """
        rows = await self.store.list_runs(states=[RunState.QUEUED, RunState.RUNNING], limit=100_000)
        now = self._clock()
        batch = _Batch()
        mirrors: list[RunMirror] = []
        for row in rows:
            if row.run_type == LOCAL_RUN_TYPE:
                continue  # driven by the `leoflow run` process that created it
            spec = self.dags.get(row.dag_id)
            if spec is None:
                log.warning("run %s of unknown DAG %s left as it is", row.run_id, row.dag_id)
                continue
            tis = await self.store.list_task_instances(run_pk=row.pk)
            mirrors.append(self._adopt_run(row, spec, tis))
        attempts = [
            Attempt(
                ti.pk,
                ti.try_number,
                ti.state.value,
                run.dag_id,
                run.run_id,
                ti.task_id,
                ti.executor_ref,
            )
            for run in mirrors
            for ti in run.tasks.values()
            if ti.state in (TaskState.QUEUED, TaskState.RUNNING)
        ]
        alive = await self.executor.adopt(attempts) if attempts else set()
        for mirror in mirrors:
            for ti in mirror.tasks.values():
                if (ti.pk, ti.try_number) in alive:
                    self._hold(ti)
                    if ti.state is TaskState.RUNNING:
                        ti.heartbeat_at = now
                        metrics.RUNNING.inc()
                elif ti.state is TaskState.SCHEDULED:
                    self._offer(ti)
                elif ti.state is TaskState.QUEUED:
                    self._move(
                        ti, TaskState.SCHEDULED, batch, try_number=ti.try_number - 1, ready_at=now
                    )
                    self._offer(ti)
                elif ti.state is TaskState.RUNNING:
                    self._move(
                        ti,
                        TaskState.UP_FOR_RETRY,
                        batch,
                        max_tries=ti.max_tries + 1,
                        ended_at=now,
                        next_retry_at=now,
                        reason="lost",
                        message="the scheduler stopped while this try ran; it is retried "
                        "without counting against the task's retries",
                    )
        if batch.changes:
            await self._flush(batch)

    # --------------------------------------------------------------- bookkeeping

    def _forget_run(self, run: RunMirror) -> None:
        self.runs.pop(run.pk, None)
        for ti in run.tasks.values():
            self._by_pk.pop(ti.pk, None)

    def _resolve_waiters(self, run: RunMirror) -> None:
        waiters = self._run_waiters.pop(run.pk, [])
        if not waiters:
            return
        self._spawn(self._deliver(run.pk, waiters))

    async def _deliver(self, run_pk: int, waiters: list[asyncio.Future[RunRow]]) -> None:
        row = await self.store.get_run(run_pk)
        for future in waiters:
            if not future.done():
                if row is None:
                    future.set_exception(KeyError(run_pk))
                else:
                    future.set_result(row)


@dataclass
class _Batch:
    changes: list[TaskChange] = field(default_factory=list)
    touched: list[TaskMirror] = field(default_factory=list)
    run_changes: list[tuple[RunMirror, RunState, RunState, dict[str, Any]]] = field(
        default_factory=list
    )
    launches: list[Launch] = field(default_factory=list)
    cancels: list[tuple[int, int, str]] = field(default_factory=list)
    tickets: list[tuple[str, int, int]] = field(default_factory=list)
    finished_runs: list[RunMirror] = field(default_factory=list)
    notes: list[tuple[int, int, str | None, str | None]] = field(default_factory=list)


def _spec_for_tasks(spec: DagSpec, present: set[str]) -> DagSpec:
    """The DAG as far as this run knows it: tasks added to the file later are not part
    of an older run, and dependencies on tasks it lacks are dropped. A task the file
    no longer has fails when its turn comes, saying so in its log."""
    if present == set(spec.tasks):
        return spec
    tasks: dict[str, TaskSpec] = {}
    for task_id in present:
        task = spec.tasks.get(task_id) or TaskSpec(
            task_id=task_id,
            command=f"echo 'task {task_id} was removed from the DAG' >&2; exit 1",
        )
        tasks[task_id] = task.model_copy(
            update={"depends_on": tuple(u for u in task.depends_on if u in present)}
        )
    return spec.model_copy(update={"tasks": tasks})
