"""Mapped tasks in the scheduler: when a mapped task's upstreams are done, its items
are made (``leoflow.domain.mapping``) and the run is read again with them.

A tick never schedules a mapped task itself: ``Expansions.hold`` keeps it back when
readiness reports it, and after the tick's commit ``Expander.run`` writes its items
(``leoflow.store.mapping``) or its end (an empty list skips it; a list it cannot have
fails it), then reloads the run, whose next tick schedules the items like any task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from leoflow.domain.mapping import FromOutput, plan_expansion
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.book import Book
from leoflow.scheduler.dag_faults import PASS_THROUGH
from leoflow.scheduler.mirror import RunMirror
from leoflow.store import Store
from leoflow.store.mapping import expand_task
from leoflow.store.rows import TaskChange, TaskSeed

log = logging.getLogger("leoflow.scheduler")


class Expansions:
    """The mapped tasks whose items are to be made, by run."""

    def __init__(self) -> None:
        self.due: dict[int, set[str]] = {}

    def hold(self, run: RunMirror, ready: Iterable[str]) -> list[str]:
        """The ready tasks to schedule now; a mapped task is kept for its expansion."""
        tasks = run.spec.tasks
        out: list[str] = []
        for task_id in ready:
            if tasks[task_id].map_over is None:
                out.append(task_id)
            else:
                self.due.setdefault(run.pk, set()).add(task_id)
        return out


class Expander:
    def __init__(
        self,
        store: Store,
        book: Book,
        expansions: Expansions,
        *,
        epoch: int | None,
        clock: Callable[[], float],
        reload_run: Callable[[int], Awaitable[None]],
    ) -> None:
        self.store = store
        self.book = book
        self.expansions = expansions
        self.epoch = epoch
        self.clock = clock
        self.reload_run = reload_run

    async def run(self) -> bool:
        """Expand what is due; True if a run changed (the loop should tick again)."""
        if not self.expansions.due:
            return False
        due, self.expansions.due = self.expansions.due, {}
        changed = False
        for run_pk, task_ids in due.items():
            run = self.book.runs.get(run_pk)
            if run is None or run.state is not RunState.RUNNING:
                continue
            wrote = [await self._expand_guarded(run, task_id) for task_id in sorted(task_ids)]
            if any(wrote):
                await self.reload_run(run_pk)
                changed = True
        return changed

    async def _expand_guarded(self, run: RunMirror, task_id: str) -> bool:
        """One mapped task's expansion; whatever it raises fails that task, not the loop."""
        try:
            return await self._expand(run, task_id)
        except PASS_THROUGH:
            raise
        except Exception as exc:
            log.exception("%s/%s: making its items failed", run.run_id, task_id)
            ti = run.tasks.get(task_id)
            if ti is None or ti.state is not TaskState.NONE:
                return False
            message = f"map_over: making the items failed ({type(exc).__name__}: {exc})"
            fields = {"ended_at": self.clock(), "reason": EndReason.MAP_FAILED, "message": message}
            change = TaskChange(ti.pk, TaskState.NONE, TaskState.FAILED, ti.try_number, fields)
            (done,) = await self.store.transition_tasks([change], epoch=self.epoch)
            return done

    async def _expand(self, run: RunMirror, task_id: str) -> bool:
        ti, task = run.tasks.get(task_id), run.spec.tasks[task_id]
        if ti is None or ti.state is not TaskState.NONE:
            return False
        source = task.map_over
        upstreams = [source.output] if isinstance(source, FromOutput) else []
        found = [run.tasks[u] for u in upstreams if u in run.tasks]
        plan = plan_expansion(
            task,
            run.conf,
            {t.task_id: t.state for t in found},
            {t.task_id: t.output for t in found},
        )
        if plan.wait:  # its trigger rule let it be ready before its list's source ended
            self.expansions.due.setdefault(run.pk, set()).add(task_id)
            return False
        if plan.end is not None:
            fields = {"ended_at": self.clock(), "reason": plan.reason, "message": plan.message}
            change = TaskChange(ti.pk, TaskState.NONE, plan.end, ti.try_number, fields)
            (done,) = await self.store.transition_tasks([change], epoch=self.epoch)
            log.info("%s/%s %s: %s", run.run_id, task_id, plan.end.value, plan.message)
            return done
        seed = TaskSeed(task_id, ti.pool, ti.pool_slots, ti.priority, ti.max_tries)
        done = await expand_task(self.store, ti.pk, run, seed, plan.items, epoch=self.epoch)
        log.info("%s/%s mapped over %d items", run.run_id, task_id, len(plan.items))
        return done
