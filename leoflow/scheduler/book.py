"""The book: the runs this scheduler drives and their task instances, in memory.

Every change to a task instance goes through ``move`` (mirror and CAS write in the
tick's batch together), every slot through ``offer``/``hold``/``release``, every
run in and out through ``adopt``/``forget``. The DAGs it knows and which are
paused live here too, since every step reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leoflow.domain.admission import Admission, Candidate
from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.mapping import with_items
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance, candidate
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store.rows import RunRow, TaskChange

TaskHook = Callable[[RunMirror, TaskMirror], None]
RunHook = Callable[[RunMirror], None]

LIVE = (TaskState.QUEUED, TaskState.RUNNING)
# The states the timers look at: they walk only these, not every task instance.
TIMED = (TaskState.UP_FOR_RETRY, TaskState.RUNNING)


class Book:
    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.dags: dict[str, DagSpec] = {}
        self.paused: set[str] = set()
        self.runs: dict[int, RunMirror] = {}
        self.by_pk: dict[int, TaskMirror] = {}
        self.timed: dict[int, TaskMirror] = {}  # by_pk's tries in a TIMED state
        self.dirty: dict[int, RunMirror] = {}  # runs set dirty since the last take_dirty
        self.entered: list[RunMirror] = []  # adopted or started: for the deadline watch
        self.queued: dict[int, RunMirror] = {}  # runs in state queued (start_runs looks)
        # Told of every change in the mirror (the console's live view, tests).
        self.on_task_change: TaskHook | None = None
        self.on_run_change: RunHook | None = None

    def live(self) -> list[TaskMirror]:
        """The tries that hold slots: queued or running."""
        return [ti for ti in self.by_pk.values() if ti.state in LIVE]

    def heartbeat(self, ti_pk: int, try_number: int, now: float) -> str | None:
        """Record an agent heartbeat; return why the task should stop, if it should."""
        ti = self.by_pk.get(ti_pk)
        if ti is None or ti.try_number != try_number or ti.state not in LIVE:
            return "this try is no longer current"
        ti.heartbeat_at = now
        return None

    # ------------------------------------------------------------------ changes

    def move(self, ti: TaskMirror, new: TaskState, batch: Batch, **fields: Any) -> None:
        """Change a task instance in the mirror and add the CAS write to the batch."""
        self.record(ti, TaskChange(ti.pk, ti.state, new, ti.try_number, fields), batch)
        self.runs[ti.run_pk].dirty = True
        self.task_changed(ti)

    def record(self, ti: TaskMirror, change: TaskChange, batch: Batch) -> None:
        """Apply ``change`` to the mirror and queue its write, without marking the run."""
        batch.changes.append(change)
        batch.touched.append(ti)
        self.set_state(ti, change.new)
        for name, value in change.fields.items():
            setattr(ti, name, value)

    def set_state(self, ti: TaskMirror, new: TaskState) -> None:
        """The one place a task instance's state changes in the mirror."""
        ti.state = new
        if new in TIMED:
            self.timed[ti.pk] = ti
        else:
            self.timed.pop(ti.pk, None)
        run = self.runs.get(ti.run_pk)
        if run is not None and run.readiness is not None:
            run.readiness.set(ti.task_id, new)

    def task_changed(self, ti: TaskMirror) -> None:
        if self.on_task_change is not None:
            self.on_task_change(self.runs[ti.run_pk], ti)

    def set_run_state(self, run: RunMirror, new: RunState, batch: Batch, **fields: Any) -> None:
        batch.run_changes.append((run, run.state, new, fields))
        run.state = new
        self._note_queued(run)
        if new is RunState.RUNNING:
            self.entered.append(run)
        if self.on_run_change is not None:
            self.on_run_change(run)

    def _note_queued(self, run: RunMirror) -> None:
        """Keep ``queued`` to the book's own mirrors in state queued (a stale mirror
        changing state touches nothing)."""
        if self.runs.get(run.pk) is not run:
            return
        if run.state is RunState.QUEUED:
            self.queued[run.pk] = run
        else:
            self.queued.pop(run.pk, None)

    def take_dirty(self) -> list[RunMirror]:
        """The runs of this book that are dirty now (each once), and start noting afresh."""
        runs = self.runs
        taken = [r for r in self.dirty.values() if r.dirty_flag and runs.get(r.pk) is r]
        self.dirty.clear()
        return taken

    def changed_runs(self, advanced: list[RunMirror], batch: Batch) -> list[RunMirror]:
        """The runs advanced this tick and those of every task instance it moved:
        the only ones that can have finished."""
        seen = {run.pk: run for run in advanced}
        runs = self.runs
        for ti in batch.touched:
            if ti.run_pk not in seen and (run := runs.get(ti.run_pk)) is not None:
                seen[ti.run_pk] = run
        return list(seen.values())

    # -------------------------------------------------------------------- slots

    def candidate(self, ti: TaskMirror) -> Candidate:
        run = self.runs[ti.run_pk]
        return candidate(ti, run.dag_id, run.created_at)

    def offer(self, ti: TaskMirror) -> None:
        self.admission.offer(self.candidate(ti))

    def hold(self, ti: TaskMirror) -> None:
        """A try that already holds its slots (adopted after a restart)."""
        self.admission.hold(self.candidate(ti))

    def release(self, ti_pk: int) -> None:
        self.admission.release(ti_pk)

    def withdraw(self, ti_pk: int) -> None:
        self.admission.withdraw(ti_pk)

    # --------------------------------------------------------------------- runs

    def adopt(self, row: RunRow, spec: DagSpec, tis: Sequence[TaskInstance]) -> RunMirror:
        present = {ti.task_id for ti in tis}
        mirror = RunMirror.build(row, spec_for_tasks(with_items(spec, tis), present), tis)
        old = self.runs.get(row.pk)
        if old is not None:
            old.dirty_sink = None  # a stale mirror turning dirty must not displace this one
            for ti in old.tasks.values():
                self.by_pk.pop(ti.pk, None)
                self.timed.pop(ti.pk, None)
        self.runs[row.pk] = mirror
        self.entered.append(mirror)
        self._note_queued(mirror)
        mirror.dirty_sink = self.dirty
        mirror.dirty = mirror.dirty_flag
        for ti in mirror.tasks.values():
            self.by_pk[ti.pk] = ti
            if ti.state in TIMED:
                self.timed[ti.pk] = ti
        self.admission.set_dag_limit(row.dag_id, mirror.spec.max_active_tasks)
        return mirror

    def forget(self, run: RunMirror) -> None:
        self.runs.pop(run.pk, None)
        if self.queued.get(run.pk) is run:
            del self.queued[run.pk]
        if self.dirty.get(run.pk) is run:
            del self.dirty[run.pk]
        run.dirty_sink = None
        for ti in run.tasks.values():
            self.by_pk.pop(ti.pk, None)
            self.timed.pop(ti.pk, None)


def spec_for_tasks(spec: DagSpec, present: set[str]) -> DagSpec:
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
