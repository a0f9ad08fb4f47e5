"""The scheduler: one loop that turns events into committed state and launches.

Everything that changes a task instance goes through a tick: executor and agent
events, timers (retries, timeouts, lost heartbeats), new runs. A tick applies
them to the book, writes the whole batch in one fenced transaction (group
commit: every event waiting on the tick is durable when its future resolves),
and only then launches what admission let through. A finished task wakes the
loop at once, so its downstream starts without waiting for a poll.

The loop is here; each step lives with its collaborator: ``book`` (runs, task
instances, slots), ``transitions`` (events, readiness, admission), ``timers``,
``run_creation`` (triggers, cron, max_active_runs), ``follow`` (the store's
other writers), ``recovery`` (after a restart), ``commit`` (the group commit),
``pending`` (the events queued for a tick), ``background`` (launches, cancels),
``waiters`` (``wait_run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Unpack

from leoflow.aio import stages
from leoflow.aio.waits import wait_set
from leoflow.domain.admission import Admission
from leoflow.domain.dag import DagSpec
from leoflow.domain.execution import (
    Executor,
    ExecutorEvent,
    KeepsDags,
    Launch,
    LogData,
)
from leoflow.scheduler import metrics
from leoflow.scheduler.asset_runs import AssetRuns
from leoflow.scheduler.backfills import BackfillDriver
from leoflow.scheduler.background import Background
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book, RunHook, TaskHook
from leoflow.scheduler.clears import ClearDesk
from leoflow.scheduler.commit import GroupCommit
from leoflow.scheduler.config import (
    LOCAL_RUN_TYPE,
    LeadershipLost,
    SchedulerConfig,
    SchedulerStopping,
)
from leoflow.scheduler.deadlines import DeadlineWatch
from leoflow.scheduler.follow import StoreFollower
from leoflow.scheduler.lineage import Lineage
from leoflow.scheduler.local_tickets import LocalTickets
from leoflow.scheduler.logbuffer import LogBuffer
from leoflow.scheduler.mapping import Expander
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.scheduler.notifications import Notifications
from leoflow.scheduler.pending import PendingEvents, finished_tries
from leoflow.scheduler.poll_steps import SteppedPoll
from leoflow.scheduler.recovery import recover
from leoflow.scheduler.retention import Retention
from leoflow.scheduler.run_creation import RunCreation, RunOptions
from leoflow.scheduler.store_poll import StorePoll
from leoflow.scheduler.timers import Timers
from leoflow.scheduler.transitions import Transitions
from leoflow.scheduler.waiters import RunWaiters
from leoflow.store import Store
from leoflow.store.errors import StaleEpoch
from leoflow.store.rows import RunRow

__all__ = [
    "LOCAL_RUN_TYPE",
    "LeadershipLost",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerStopping",
]

log = logging.getLogger("leoflow.scheduler")


class Scheduler:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        config: SchedulerConfig | None = None,
        *,
        epoch: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        config = config or SchedulerConfig()
        self.store = store
        self.executor = executor
        self.config = config
        self.epoch = epoch
        self._clock = clock
        # Launches, cancels, deliveries to waiters: set going, not waited for.
        self._background = Background(executor, self.report, clock=clock)
        self.book = Book(
            Admission(config.parallelism, dict(config.pools), config.default_pool_slots)
        )
        self._wakeup = asyncio.Event()
        self._waiters = RunWaiters(store, self.book.runs, self._background.spawn)
        self._creation = RunCreation(
            store,
            self.book,
            config,
            epoch=epoch,
            clock=clock,
            wake=self._wakeup.set,
            learn=self._learn,
        )
        self._follower = StoreFollower(
            store,
            self.book,
            epoch=epoch,
            clock=clock,
            spec_changed=self._creation.schedule_changed,
            cancel=self._background.cancel,
            run_ended=lambda run: self._waiters.run_ended(run.pk),
            pools=config.pools,
            # A solo run (``leoflow run``) knows only its own DAG: it never drops others'.
            keep_dags=executor.keep_dags
            if isinstance(executor, KeepsDags) and not config.solo
            else None,
            removed_dag_grace=config.removed_dag_grace,
        )
        # The tickets of agents that can only reach this process: not the store's.
        self.local_tickets = (
            LocalTickets() if executor.uses_agent and executor.agents_dial_here else None
        )
        self._commit = GroupCommit(
            store,
            self.book,
            epoch=epoch,
            ticket_ttl=config.ticket_ttl,
            clock=clock,
            reload_run=self._follower.reload_run,
            local_tickets=self.local_tickets,
        )
        self._clears = ClearDesk(
            store,
            self.book,
            epoch=epoch,
            clock=clock,
            cancel=self._background.cancel,
            reload_run=self._follower.reload_run,
        )
        self._steps = Transitions(self.book, uses_agent=executor.uses_agent)
        self._expander = Expander(
            store,
            self.book,
            self._steps.expansions,
            epoch=epoch,
            clock=clock,
            reload_run=self._follower.reload_run,
        )
        self._timers = Timers(
            self.book,
            self._steps,
            heartbeat_timeout=config.heartbeat_timeout,
            uses_agent=executor.uses_agent,
        )
        self._events = PendingEvents()
        self._loop_task: asyncio.Task[None] | None = None
        self._logs = LogBuffer(store, interval=config.log_flush_interval)
        self.retention = Retention(store, None if config.solo else config.retention)
        self._backfills = BackfillDriver(self)
        self._deadlines = DeadlineWatch(self)
        # Webhooks; the runtime gives it the secrets backend (leoflow/runtime/).
        self.notifications = Notifications()
        # OpenLineage events; off until the runtime sets one up from the settings.
        self.lineage = Lineage()
        self._follower.ended_elsewhere = lambda *args: self.lineage.ended_elsewhere(*args)
        self._last_poll = 0.0
        self._ticks = 0  # ticks so far (the stage trace numbers them)
        asset_runs = AssetRuns(store, self.book, self._creation, epoch)
        self._poll = StorePoll(
            store, self._follower, self._creation, self._backfills, self._clears, asset_runs
        )
        self._stepped = SteppedPoll()  # the poll in progress, a step per tick (poll_steps)
        self._stopping = False
        self.failure: BaseException | None = None
        # The tries that were live when stop() began: their processes are killed, and
        # the next start runs them again.
        self.interrupted: list[TaskMirror] = []

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self.executor.start(self.report)
        if not self.config.solo:
            await self._follower.sync_definitions()
            batch = await recover(self.store, self.book, self.executor, self._clock())
            if batch.changes:
                # The tries the last scheduler left live end here: their lineage too.
                lineage = self.lineage.collect(batch, self.book.runs, self._clock())
                await self._commit.flush(batch)
                self.lineage.emit(lineage)
        self._logs.start()
        self._loop_task = asyncio.create_task(self._loop(), name="leoflow-scheduler-loop")
        self.retention.start()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        await self.retention.stop()
        self.interrupted = self.book.live()
        self._wakeup.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            # A loop that died has its error in self.failure; stop the executor anyway.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        # Agents whose Start or Complete waits on the loop get a refusal at once
        # rather than an answer that never comes (which held Lite's exit 15 s).
        self._events.fail_all(SchedulerStopping("Leoflow is stopping"))
        await self.executor.stop()
        self._background.stop()
        await self._logs.stop()
        await self.notifications.stop()
        await self.lineage.stop()

    def watch(self, on_task: TaskHook | None = None, on_run: RunHook | None = None) -> None:
        """Be told of every change the scheduler makes in its book (the console's view)."""
        self.book.on_task_change = on_task
        self.book.on_run_change = on_run

    # console.py assigns these; new callers use watch().
    @property
    def on_task_change(self) -> TaskHook | None:
        return self.book.on_task_change

    @on_task_change.setter
    def on_task_change(self, hook: TaskHook | None) -> None:
        self.book.on_task_change = hook

    @property
    def on_run_change(self) -> RunHook | None:
        return self.book.on_run_change

    @on_run_change.setter
    def on_run_change(self, hook: RunHook | None) -> None:
        self.book.on_run_change = hook

    def wake(self) -> None:
        """Look at the store now rather than at the next poll (another writer changed
        it: a DAG written by the folder loader or the API, a trigger, a pool)."""
        self._poll.forget()
        self._last_poll = 0.0
        self._stepped.urge()
        self._wakeup.set()

    async def reload_run(self, run_pk: int) -> None:
        """Take the run as the store has it now (a collaborator changed it there)."""
        await self._follower.reload_run(run_pk)

    async def _learn(self, dag_id: str) -> DagSpec | None:
        return await self._follower.learn(dag_id)

    def set_pool(self, name: str, slots: int) -> None:
        self.book.admission.set_pool(name, slots)
        self._wakeup.set()

    # -------------------------------------------------------------------- events

    def report(self, event: ExecutorEvent) -> None:
        """Executor callback: queue the event for the next tick."""
        if isinstance(event, LogData):
            self._logs.add(event.ti_pk, event.try_number, event.data)
            return
        self._events.add(event)
        self._wakeup.set()

    async def submit(self, event: ExecutorEvent) -> None:
        """Queue an event and wait until its effect is committed."""
        if isinstance(event, LogData):
            await self.store.append_log(event.ti_pk, event.try_number, event.data)
            return
        if self._stopping:
            raise SchedulerStopping("Leoflow is stopping")
        done = self._events.add_waited(event)
        self._wakeup.set()
        await done

    async def trigger(self, dag_id: str, **options: Unpack[RunOptions]) -> RunRow:
        """Create a run of a DAG the store holds; it starts as soon as max_active_runs
        allows. Options: conf, run_id, logical_date, run_type (default manual)."""
        return await self._creation.create(dag_id, **options)

    async def join(self) -> None:
        """Until the loop stops; re-raises what stopped it (LeadershipLost, say)."""
        if self._loop_task is not None:
            await asyncio.shield(self._loop_task)

    async def wait_run(self, run_pk: int) -> RunRow:
        """Wait until the run is terminal."""
        return await self._waiters.until_ended(run_pk, lambda: self._loop_task)

    def task(self, ti_pk: int) -> TaskMirror | None:
        return self.book.by_pk.get(ti_pk)

    def run_of(self, ti: TaskMirror) -> RunMirror | None:
        return self.book.runs.get(ti.run_pk)

    def heartbeat(self, ti_pk: int, try_number: int) -> str | None:
        """Record an agent heartbeat; return why the task should stop, if it should.

        A try that is not current any more (its run was cancelled, it was retried)
        stops; cancelling a single try is done by ending its run."""
        return self.book.heartbeat(ti_pk, try_number, self._clock())

    # ---------------------------------------------------------------------- loop

    async def _loop(self) -> None:
        try:
            while not self._stopping:
                now = self._clock()
                timeout = self._timers.next_deadline(now, self.config.poll_interval) - now
                if timeout > 0 and not self._events and not self._stepped.pending:
                    await wait_set(self._wakeup, timeout)
                self._wakeup.clear()
                await self._tick()
        except StaleEpoch as exc:
            metrics.STALE_WRITES.inc()
            log.error("leadership lost: %s; stopping the scheduler loop", exc)
            self.failure = LeadershipLost(str(exc))
            self._events.fail_all(self.failure)
            raise self.failure from exc
        except BaseException as exc:
            self.failure = exc
            stopping = self._stopping and isinstance(exc, asyncio.CancelledError)
            self._events.fail_all(SchedulerStopping("Leoflow is stopping") if stopping else exc)
            raise

    async def _tick(self) -> None:
        now = self._clock()
        # Read the store while the book still equals what is committed: between
        # here and the flush below the book runs ahead of the store.
        if now - self._last_poll >= self.config.poll_interval and not self._stepped.pending:
            self._last_poll = now
            if not self.config.solo:
                self._stepped.begin(self._poll.steps())
        if self._stepped.pending:  # a step, and more only while no event waits
            await self._stepped.run(lambda: bool(self._events))
        await self._deadlines.check(now)
        pending = self._events.take()
        self._ticks += 1
        stages.mark("tick", self._ticks, len(pending))
        batch = Batch()
        for item in pending:
            if item.event is not None:
                self._steps.apply(item.event, batch)
        self._timers.fire(now, batch)
        self._creation.start_runs(now, batch)
        advanced = self.book.take_dirty()  # the runs that changed, not every run
        for run in advanced:
            self._steps.advance(run, now, batch)
        self._steps.admit(now, batch)
        self._steps.finish_runs(now, batch, self.book.changed_runs(advanced, batch))
        deliveries = self.notifications.collect(batch, self.book.runs, now)
        # The finished tries' buffered output goes in this same commit (LogBuffer).
        finished_keys = finished_tries(pending)
        lineage = self.lineage.collect(batch, self.book.runs, now)
        try:
            if finished_keys:
                await self._logs.write_with(
                    finished_keys, lambda logs: self._commit.flush(batch, logs)
                )
            else:
                await self._commit.flush(batch)
        except BaseException as exc:
            self._events.settle(pending, exc)
            raise
        stages.mark("flushed", self._ticks, len(batch.launches))
        # Launches first: the loop runs ready tasks in order, so the downstream pods'
        # creates go ahead of the replies to the Completes that freed them.
        for launch in batch.launches:
            self._background.spawn(self._launch(launch))
        self._events.settle(pending)
        self.notifications.emit(deliveries)
        self.lineage.emit(lineage)
        for ti_pk, try_number, reason in batch.cancels:
            self._background.cancel(ti_pk, try_number, reason)
        for run in batch.finished_runs:
            self._waiters.run_ended(run.pk)
        if await self._expander.run():  # mapped tasks' items, in the store and the book
            self._wakeup.set()

    async def _launch(self, launch: Launch) -> None:
        # A method of its own so a trace can wrap it (benchmarks/trace_pro_scale.py).
        await self._background.launch(launch)
