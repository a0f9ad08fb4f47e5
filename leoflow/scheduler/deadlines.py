"""Run deadlines and whole-run timeouts, checked by the leader at each tick.

``deadline`` counts from the run's logical date, or its trigger time without one: a
run not finished by then is marked (``deadline_missed_at``, once, in the store) and
its DAG's ``deadline_missed`` notifications go out; the run goes on. ``run_timeout``
counts from the run's start: a run still running after it fails, and its tasks are
stopped as for a cancel.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from leoflow.domain.durations import format_duration
from leoflow.domain.states import RunState
from leoflow.scheduler.deadline_due import LIVE_RUN, DeadlineDue
from leoflow.scheduler.instruments import counter
from leoflow.store.deadlines import mark_deadline_missed

if TYPE_CHECKING:
    from leoflow.scheduler.core import Scheduler
    from leoflow.scheduler.mirror import RunMirror

log = logging.getLogger("leoflow.scheduler.deadlines")

MISSED = counter("leoflow_run_deadlines_missed_total", "Runs found past their DAG's deadline")
TIMED_OUT = counter("leoflow_run_timeouts_total", "Runs failed by their DAG's run_timeout")


class DeadlineWatch:
    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._due = DeadlineDue()

    async def check(self, now: float) -> None:
        """Only the runs with a due time come (``deadline_due``), not every run."""
        book = self._scheduler.book
        for entered in book.entered:
            self._due.note(entered)
        book.entered.clear()
        for run in self._due.take_due(now, book.runs):
            await self._check_run(run, now)
            if book.runs.get(run.pk) is run:
                self._due.note(run)  # what is still pending waits for its time

    async def _check_run(self, run: RunMirror, now: float) -> None:
        if run.state not in LIVE_RUN:
            return
        spec = run.spec
        if spec.deadline is not None and run.deadline_missed_at is None:
            origin = run.logical_date if run.logical_date is not None else run.created_at
            if now >= origin + spec.deadline:
                await self._missed(run, now, spec.deadline)
        if (
            spec.run_timeout is not None
            and run.state is RunState.RUNNING
            and run.started_at is not None
            and now - run.started_at >= spec.run_timeout
        ):
            await self._time_out(run, now, spec.run_timeout)

    async def _missed(self, run: RunMirror, now: float, deadline: float) -> None:
        scheduler = self._scheduler
        run.deadline_missed_at = now
        if not await mark_deadline_missed(scheduler.store, run.pk, now, epoch=scheduler.epoch):
            return  # noted (and notified) before
        MISSED.inc()
        message = f"not finished {format_duration(deadline)} after its " + (
            "logical date" if run.logical_date is not None else "trigger"
        )
        log.warning("run %s of %s missed its deadline: %s", run.run_id, run.dag_id, message)
        notes = scheduler.notifications.collect_run(
            run, "deadline_missed", run.state.value, message, now
        )
        scheduler.notifications.emit(notes)

    async def _time_out(self, run: RunMirror, now: float, limit: float) -> None:
        scheduler = self._scheduler
        message = f"the run timed out after {format_duration(limit)} (run_timeout)"
        ok = await scheduler.store.transition_run(
            run.pk, RunState.RUNNING, RunState.FAILED, epoch=scheduler.epoch,
            ended_at=now, message=message,
        )  # fmt: skip
        if ok:
            TIMED_OUT.inc()
            log.warning("run %s of %s: %s", run.run_id, run.dag_id, message)
            notes = scheduler.notifications.collect_run(run, "failure", "failed", message, now)
            scheduler.notifications.emit(notes)
        # Either way the store has moved on: follow it (stops and fails what is left).
        await scheduler.reload_run(run.pk)
