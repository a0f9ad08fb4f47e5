"""Runs come to be and start: a trigger creates one, cron creates the due ones
(catching up at most ``max_catchup_runs`` queued at a time), and queued runs start
as ``max_active_runs`` allows (``domain.runs.runs_to_start``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_run_select import run_tasks
from leoflow.domain.runs import runs_to_start
from leoflow.domain.schedule import MAX_CATCHUP_RUNS, clamped_utc, due_runs
from leoflow.domain.states import RunState
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.scheduler.config import LOCAL_RUN_TYPE, SchedulerConfig
from leoflow.scheduler.cron_due import CronDue
from leoflow.scheduler.dag_faults import RETRY_AFTER, DagFaults
from leoflow.scheduler.mirror import RunMirror
from leoflow.store import Store
from leoflow.store.errors import RunExists
from leoflow.store.rows import RunRow, TaskInstanceRow, TaskSeed

log = logging.getLogger("leoflow.scheduler")


class RunOptions(TypedDict, total=False):
    """How a run is made; every key may be left out (``Scheduler.trigger``)."""

    conf: dict[str, Any] | None
    run_id: str | None
    logical_date: float | None
    run_type: str


def task_seeds(spec: DagSpec, conf: dict[str, Any] | None) -> list[TaskSeed]:
    """The task instances a new run of ``spec`` starts with (a conf may select some)."""
    keep = run_tasks(spec, conf)  # RunSelectionError: the caller's to say
    return [
        TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
        for t in spec.tasks.values()
        if keep is None or t.task_id in keep
    ]


class RunCreation:
    def __init__(
        self,
        store: Store,
        book: Book,
        config: SchedulerConfig,
        *,
        epoch: int | None,
        clock: Callable[[], float],
        wake: Callable[[], None],
        learn: Callable[[str], Awaitable[DagSpec | None]],
    ) -> None:
        self.store = store
        self.book = book
        self.config = config
        self.epoch = epoch
        self._clock = clock
        self._wake = wake
        self._learn = learn
        self._started_at = clock()
        self._cron_due = CronDue()
        self._catchup_capped: set[str] = set()
        self._faults = DagFaults(store)

    @property
    def faults(self) -> DagFaults:
        """Where a DAG's scheduling errors are said (and cleared once it recovers)."""
        return self._faults

    def schedule_changed(self, dag_id: str) -> None:
        """A new spec: work out its next fire time again."""
        self._cron_due.forget(dag_id)

    async def create(self, dag_id: str, **options: Unpack[RunOptions]) -> RunRow:
        spec = self.book.dags.get(dag_id) or await self._learn(dag_id)
        if spec is None:
            raise KeyError(f"unknown DAG {dag_id!r}")
        run_type = LOCAL_RUN_TYPE if self.config.solo else options.get("run_type", "manual")
        logical_date = options.get("logical_date")
        seeds = task_seeds(spec, options.get("conf"))
        row, tis = await self.store.create_run_with_tasks(
            dag_id,
            options.get("run_id"),  # None: the store makes one up
            run_type=run_type,
            logical_date=logical_date,
            conf=options.get("conf") or {},
            tasks=seeds,
            epoch=self.epoch,
        )
        self.adopt(row, spec, tis)
        return row

    def adopt(self, row: RunRow, spec: DagSpec, tis: list[TaskInstanceRow]) -> None:
        """A run just created: into the book, and the loop woken to start it."""
        # The loop may have picked the new run up from the store while we awaited;
        # its mirror may already be ahead of these rows.
        if row.pk not in self.book.runs:
            self.book.adopt(row, spec, tis)
        self._wake()

    # --------------------------------------------------------------------- cron

    async def create_due_runs(self) -> None:
        """Cron: create the runs whose time has come (one per DAG unless catching up)."""
        now = self._clock()
        todo = self._cron_due.to_check(now, self.book.dags, self.book.paused)
        try:
            await self._create_due(now, todo)
        except BaseException:
            self._cron_due.interrupted()
            raise

    async def _create_due(self, now: float, todo: list[tuple[str, DagSpec]]) -> None:
        for dag_id, spec in todo:
            due = self._cron_due.get(dag_id)
            if due is not None and due > now:
                continue  # the next fire time is known and still ahead

            async def work(dag_id: str = dag_id, spec: DagSpec = spec) -> None:
                await self._create_due_one(now, dag_id, spec)

            if not await self._faults.guard(dag_id, "schedule it or create its runs", work):
                self._cron_due.set(dag_id, now + RETRY_AFTER)

    async def _create_due_one(self, now: float, dag_id: str, spec: DagSpec) -> None:
        """One DAG's due runs, and its next fire time; anything raised is this DAG's."""
        last = await self.store.last_scheduled_run(dag_id)
        last_date = last.logical_date if last is not None else None
        room = self._catchup_room(dag_id) if spec.catchup else MAX_CATCHUP_RUNS
        fires = due_runs(spec, last_date, now, self._started_at, limit=room + 1)
        for logical_date in self._within_catchup_cap(dag_id, fires, room):
            try:
                row = await self.create(dag_id, logical_date=logical_date, run_type="scheduled")
            except RunExists:
                continue  # another scheduler (or an earlier term of ours) made it
            log.info("created scheduled run %s of %s", row.run_id, dag_id)
            last_date = logical_date
        cron = spec.cron()
        base = max(last_date or self._started_at, self._started_at if not spec.catchup else 0.0)
        upcoming = cron.next_after(clamped_utc(base)) if cron else None
        self._cron_due.set(dag_id, upcoming.timestamp() if upcoming else float("inf"))

    def _catchup_room(self, dag_id: str) -> int:
        queued = sum(
            1 for r in self.book.runs.values() if r.dag_id == dag_id and r.state is RunState.QUEUED
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

    # -------------------------------------------------------------------- start

    def start_runs(self, now: float, batch: Batch) -> None:
        """Queued runs of unpaused DAGs start, oldest first, up to max_active_runs."""
        if not self.book.queued:
            return  # the common tick: no walk over every run
        queued: dict[str, list[RunMirror]] = {}
        running: dict[str, int] = {}
        for run in self.book.runs.values():
            if run.state is RunState.QUEUED and run.dag_id not in self.book.paused:
                queued.setdefault(run.dag_id, []).append(run)
            elif run.state is RunState.RUNNING:
                running[run.dag_id] = running.get(run.dag_id, 0) + 1
        for dag_id, waiting in queued.items():
            waiting.sort(key=lambda r: r.pk)  # equal ages start in creation order
            limit = waiting[0].spec.max_active_runs
            for run in runs_to_start(waiting, running.get(dag_id, 0), limit):
                run.started_at = now
                run.dirty = True
                self.book.set_run_state(run, RunState.RUNNING, batch, started_at=now)
