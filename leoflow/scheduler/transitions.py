"""How one tick moves task instances: events applied, tries ended, ready tasks
offered, admitted ones queued with their launch, finished runs closed.

Each step changes the book and adds its writes to the tick's batch; nothing
here awaits, so a tick's decisions see one consistent picture.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from leoflow.aio import stages
from leoflow.domain.assets.events import produced_events
from leoflow.domain.backfill import run_env
from leoflow.domain.credentials import issue_ticket
from leoflow.domain.execution import ExecutorEvent, Launch, LaunchWaiting, TaskFinished, TaskStarted
from leoflow.domain.progress import end_of_try, evaluate, final_state
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import LIVE, Book
from leoflow.scheduler.mapping import Expansions
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.scheduler.outputs import launch_problem, mirror_inputs
from leoflow.store.asset_events import TaskAssetEvent
from leoflow.store.rows import TaskChange

log = logging.getLogger("leoflow.scheduler")


class Transitions:
    def __init__(self, book: Book, *, uses_agent: bool) -> None:
        self.book = book
        self.uses_agent = uses_agent
        self.expansions = Expansions()  # mapped tasks wait here for their items

    def apply(self, event: ExecutorEvent, batch: Batch) -> None:
        ti = self.book.by_pk.get(event.ti_pk)
        if ti is None or ti.try_number != event.try_number:
            log.info("ignoring %s for a try that is not current", type(event).__name__)
            return
        if isinstance(event, TaskStarted):
            if ti.state is TaskState.QUEUED:
                self.book.move(
                    ti,
                    TaskState.RUNNING,
                    batch,
                    started_at=event.at,
                    heartbeat_at=event.at,
                    executor_ref=event.executor_ref,
                )
                metrics.RUNNING.inc()
        elif isinstance(event, TaskFinished):
            stages.mark("applied", ti.pk, ti.try_number)
            self.finish_try(
                ti, event.reason, event.message, event.exit_code, event.at, batch, event.output
            )
        elif (
            isinstance(event, LaunchWaiting)
            and ti.state is TaskState.QUEUED
            and (ti.reason, ti.message) != (event.reason, event.message)
        ):
            # A note only: the try stays queued and keeps its slot (see the executor).
            ti.reason, ti.message = event.reason, event.message
            batch.notes.append((ti.pk, ti.try_number, event.reason, event.message))

    def finish_try(
        self,
        ti: TaskMirror,
        reason: str,
        message: str,
        exit_code: int | None,
        at: float,
        batch: Batch,
        output: str | None = None,
    ) -> None:
        if ti.state not in LIVE:
            return
        was_running = ti.state is TaskState.RUNNING
        run = self.book.runs[ti.run_pk]
        spec = run.spec.tasks.get(ti.task_id)
        events: list[tuple[str, str | None]] = []
        if reason == EndReason.SUCCESS and spec is not None and spec.produces:
            events, problem = produced_events(spec.produces, output)
            if problem:
                reason, message = EndReason.OUTPUT_INVALID, problem
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
        if new is TaskState.SUCCESS:
            fields["output"] = output  # None too: an earlier try's output is gone
            batch.asset_events += [
                TaskAssetEvent(ti.pk, ti.try_number, run.dag_id, run.run_id, ti.task_id, u, x)
                for u, x in events
            ]
        self.book.move(ti, new, batch, **fields)
        if was_running:
            metrics.RUNNING.dec()
        self.book.release(ti.pk)
        metrics.TASKS_FINISHED.labels(state=new.value).inc()

    def advance(self, run: RunMirror, now: float, batch: Batch) -> None:
        run.dirty = False
        if run.state is not RunState.RUNNING:
            return
        readiness = (
            run.readiness.evaluate()
            if run.readiness is not None
            else evaluate(run.spec, run.order, run.states())
        )
        for task_id, failed_upstreams in readiness.upstream_failed:
            self.book.move(
                run.tasks[task_id],
                TaskState.UPSTREAM_FAILED,
                batch,
                ended_at=now,
                reason=EndReason.UPSTREAM_FAILED,
                message="upstream failed: " + ", ".join(failed_upstreams),
            )
        for task_id, deciding in readiness.skipped:
            rule = run.spec.tasks[task_id].trigger_rule
            self.book.move(
                run.tasks[task_id],
                TaskState.SKIPPED,
                batch,
                ended_at=now,
                reason=EndReason.SKIPPED,
                message=f"trigger rule {rule} can no longer be met: " + ", ".join(deciding),
            )
        for task_id in self.expansions.hold(run, readiness.ready):
            ti = run.tasks[task_id]
            self.book.move(ti, TaskState.SCHEDULED, batch, ready_at=now)
            self.book.offer(ti)

    def admit(self, now: float, batch: Batch) -> None:
        for candidate in self.book.admission.admit():
            ti = self.book.by_pk.get(candidate.key)
            if ti is None or ti.state is not TaskState.SCHEDULED:
                self.book.release(candidate.key)
                continue
            fields = {"try_number": ti.try_number + 1, "queued_at": now}
            change = TaskChange(ti.pk, TaskState.SCHEDULED, TaskState.QUEUED, ti.try_number, fields)
            self.book.record(ti, change, batch)
            stages.mark("admitted", ti.pk, ti.try_number)
            if ti.ready_at is not None:
                metrics.DISPATCH_LATENCY.observe(max(0.0, now - ti.ready_at))
            self.book.task_changed(ti)
            run = self.book.runs[ti.run_pk]
            if (problem := launch_problem(run, ti.task_id)) is not None:
                self.finish_try(ti, EndReason.LAUNCH_FAILED, problem, None, now, batch)
                continue
            batch.launches.append(self._launch_of(run, ti, batch))
            metrics.ADMITTED.inc()
        metrics.observe_admission(self.book.admission)

    def _launch_of(self, run: RunMirror, ti: TaskMirror, batch: Batch) -> Launch:
        ticket = None
        if self.uses_agent:
            ticket, ticket_hash = issue_ticket()
            batch.tickets.append((ticket_hash, ti.pk, ti.try_number))
        return Launch(
            ti_pk=ti.pk,
            try_number=ti.try_number,
            dag_id=run.dag_id,
            run_id=run.run_id,
            task_id=ti.task_id,
            spec=run.spec.tasks[ti.task_id],
            ticket=ticket,
            env=run_env(run.spec, run.logical_date),
            inputs={} if self.uses_agent else mirror_inputs(run, ti.task_id),
            reuse_pods=run.spec.kubernetes.reuse_pods if run.spec.kubernetes else None,
        )

    def finish_runs(
        self, now: float, batch: Batch, runs: Iterable[RunMirror] | None = None
    ) -> None:
        """End the running runs whose tasks are all done: of ``runs`` (the ones whose
        tasks changed this tick), or of every run."""
        for run in list(self.book.runs.values() if runs is None else runs):
            if run.state is not RunState.RUNNING:
                continue
            outcome = (
                run.readiness.final_state()
                if run.readiness is not None
                else final_state(run.spec, run.states())
            )
            if outcome is None:
                continue
            failed = [t for t, ti in run.tasks.items() if ti.state is TaskState.FAILED]
            message = "failed tasks: " + ", ".join(sorted(failed)) if failed else None
            batch.finished_runs.append(run)
            self.book.set_run_state(run, outcome, batch, ended_at=now, message=message)
