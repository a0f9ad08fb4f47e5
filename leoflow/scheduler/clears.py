"""Applying clear requests: the API records them, the leading scheduler carries them out.
A request may also mark tasks success or failed, or clear a run's failed tasks
(``action``; which tasks: ``leoflow/domain/marking.py``).

Run at the start of a tick, while the book still equals what is committed. Each
cleared task instance goes back to ``none`` through the book (so mirror and store
change together, by compare-and-set); a queued or running try is stopped through
the executor's cancel, the same path a run cancel takes, after the write is
committed. The stopped try's late outcome finds its task instance no longer live
(and, once the task runs again, a newer try number) and is ignored.

A compare-and-set that lost a race (another replica's agent endpoint ended a try
in between) reloads the run and the request is applied again at once: what it
cleared already is ``none`` and is left alone, so nothing is cleared twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from leoflow.domain.clearing import cleared_fields
from leoflow.domain.dag import DagSpec
from leoflow.domain.mapping import with_items
from leoflow.domain.marking import MARKS, marked_fields, plan, reopened_fields
from leoflow.domain.states import RUN_TERMINAL, RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import LIVE, Book
from leoflow.scheduler.config import LOCAL_RUN_TYPE
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store import Store
from leoflow.store.clears import (
    ClearLost,
    ClearRequest,
    clear_finished_run,
    pending_clears,
    settle_clear,
)
from leoflow.store.marks import mark_finished_run

log = logging.getLogger("leoflow.scheduler")

# Lost races in a row before a request is given up (each is another writer's change).
_ATTEMPTS = 5


class ClearDesk:
    def __init__(
        self,
        store: Store,
        book: Book,
        *,
        epoch: int | None,
        clock: Callable[[], float],
        cancel: Callable[[int, int, str], None],
        reload_run: Callable[[int], Awaitable[None]],
    ) -> None:
        self.store = store
        self.book = book
        self.epoch = epoch
        self._clock = clock
        self._cancel = cancel
        self._reload_run = reload_run

    async def apply_pending(self) -> None:
        for request in await pending_clears(self.store):
            run = self.book.runs.get(request.run_pk)
            if run is not None:
                await self._apply_live(request, run)
            else:
                await self._apply_elsewhere(request)

    async def _settle(self, request: ClearRequest, outcome: str, attempts: int = 1) -> None:
        log.info("clear of %s (request %d): %s", request.task_id, request.pk, outcome)
        await settle_clear(
            self.store, request.pk, outcome, self._clock(), attempts=attempts, epoch=self.epoch
        )

    def _plan(
        self, request: ClearRequest, spec: DagSpec, states: dict[str, tuple[TaskState, int]]
    ) -> tuple[list[str], list[str]]:
        known = request.task_id in spec.tasks
        return plan(
            request.action,
            request.task_id,
            spec.downstream() if known else {},
            {t: s.depends_on for t, s in spec.tasks.items()},
            states,
            with_downstream=request.downstream,
            with_upstream=request.upstream,
        )

    async def _apply_live(self, request: ClearRequest, run: RunMirror) -> None:
        if run.state is RunState.QUEUED:
            await self._settle(request, "nothing changed: the run had not started")
            return
        mark = MARKS.get(request.action)
        verb = "cleared" if mark is None else f"marked {mark.value}"
        for attempt in range(1, _ATTEMPTS + 1):
            run = self.book.runs.get(request.run_pk) or run
            states = {t: (ti.state, ti.try_number) for t, ti in run.tasks.items()}
            names, reopen = self._plan(request, run.spec, states)
            batch = Batch()
            for name in names:
                ti = run.tasks.get(name)
                if ti is None:
                    continue
                if mark is None and ti.state is not TaskState.NONE:
                    self._reset(run, ti, request.requested_by, batch)
                elif mark is not None and ti.state is not mark:
                    self._mark(ti, mark, request.requested_by, batch)
            for name in reopen:
                if (ti := run.tasks.get(name)) is not None:
                    self.book.move(
                        ti, TaskState.NONE, batch, **reopened_fields(request.requested_by)
                    )
            results = await self.store.transition_tasks(batch.changes, epoch=self.epoch)
            written = {c.ti_pk for c, ok in zip(batch.changes, results, strict=True) if ok}
            # A try whose write went through is stopped, whatever became of the others.
            for ti_pk, try_number, why in batch.cancels:
                if ti_pk in written:
                    self._cancel(ti_pk, try_number, why)
            if all(results):
                done = ", ".join(names) or "no task"
                again = f"; decided again: {', '.join(reopen)}" if reopen else ""
                await self._settle(request, f"{verb}: {done}{again}", attempt)
                return
            log.warning("clear of %s lost a race (attempt %d); reloading", request.task_id, attempt)
            await self._reload_run(run.pk)
            if run.pk not in self.book.runs:  # the run ended meanwhile
                await self._apply_elsewhere(request, attempt)
                return
        await self._settle(request, "given up: the run kept changing under it", _ATTEMPTS)

    def _stop_live(self, ti: TaskMirror, message: str, batch: Batch) -> bool:
        """Stop a queued or running try (after the write) and give back its slot."""
        live = ti.state in LIVE
        if live:
            batch.cancels.append((ti.pk, ti.try_number, message))
            self.book.release(ti.pk)
            if ti.state is TaskState.RUNNING:
                metrics.RUNNING.dec()
        elif ti.state is TaskState.SCHEDULED:
            self.book.withdraw(ti.pk)
        return live

    def _mark(self, ti: TaskMirror, state: TaskState, by: str, batch: Batch) -> None:
        live = self._stop_live(ti, f"marked {state.value} by {by}", batch)
        self.book.move(ti, state, batch, **marked_fields(state, by, self._clock(), stopped=live))

    def _reset(self, run: RunMirror, ti: TaskMirror, by: str, batch: Batch) -> None:
        spec = run.spec.tasks.get(ti.task_id)
        tries = spec.max_tries if spec is not None else 1
        message = f"cleared by {by}" + (
            f" (try {ti.try_number} stopped)" if ti.state in LIVE else ""
        )
        live = self._stop_live(ti, message, batch)
        fields = cleared_fields(ti.try_number, tries, message, stopped=live)
        self.book.move(ti, TaskState.NONE, batch, **fields)

    async def _apply_elsewhere(self, request: ClearRequest, attempts: int = 1) -> None:
        """A request for a run the book does not hold: ended before it was applied,
        not adopted yet (next poll), or a ``leoflow run`` of another process."""
        row = await self.store.get_run(request.run_pk)
        if row is None:
            await self._settle(request, "nothing cleared: the run is gone", attempts)
            return
        if row.state not in RUN_TERMINAL:
            if row.run_type == LOCAL_RUN_TYPE:
                await self._settle(request, "nothing cleared: a local run", attempts)
            return
        tis = await self.store.list_task_instances(run_pk=row.pk)
        dag_spec = self.book.dags.get(row.dag_id)
        # The run's own graph: a mapped task's items are its tasks (and their retries).
        spec = with_items(dag_spec, tis) if dag_spec is not None else None
        states = {ti.task_id: (ti.state, ti.try_number) for ti in tis}
        names, reopen = self._plan(request, spec, states) if spec is not None else ([], [])
        if spec is None and request.action == "clear":
            names = [request.task_id]
        mark = MARKS.get(request.action)
        try:
            if not names:
                raise ClearLost("no task to change")
            if mark is None:
                done = await clear_finished_run(
                    self.store, row, tis, spec, names, target=names[0],
                    by=request.requested_by, epoch=self.epoch,
                )  # fmt: skip
            else:
                done = await mark_finished_run(
                    self.store, row, tis, names, reopen, state=mark, target=request.task_id,
                    by=request.requested_by, at=self._clock(), epoch=self.epoch,
                )  # fmt: skip
        except ClearLost as exc:
            await self._settle(request, f"nothing changed: {exc}", attempts)
            return
        verb = "cleared" if mark is None else f"marked {mark.value}"
        await self._settle(request, f"{verb}: {', '.join(done)}", attempts)
