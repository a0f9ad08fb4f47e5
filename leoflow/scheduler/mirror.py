"""The scheduler's in-memory picture of the runs it drives.

The store is the truth; the mirror is what the leader believes after its own
committed writes, so that a decision never needs a read. A compare-and-set
that fails means the picture is stale, and the run is reloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from leoflow.domain.dag import DagSpec
from leoflow.domain.progress import topological_order
from leoflow.domain.readiness import RunReadiness
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.store.rows import RunRow


@dataclass(slots=True)
class TaskMirror:
    """The mutable part of a ``TaskInstance`` the scheduler decides on. Its fields
    are the record's (same names, same types; a unit test holds them together),
    copied by name in ``from_row``; the store is still where the rest is read."""

    pk: int
    run_pk: int
    task_id: str
    state: TaskState
    try_number: int
    max_tries: int
    pool: str
    pool_slots: int
    priority: int
    ready_at: float | None = None
    queued_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    next_retry_at: float | None = None
    heartbeat_at: float | None = None
    executor_ref: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    output: str | None = None  # JSON text: what its downstream tasks get as input

    @classmethod
    def from_row(cls, row: TaskInstance) -> TaskMirror:
        return cls(**{name: getattr(row, name) for name in MIRRORED_FIELDS})


# Every mirror field is a record field, so the copy is by name.
MIRRORED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskMirror))


@dataclass(slots=True)
class RunMirror:
    pk: int
    dag_id: str
    run_id: str
    state: RunState
    created_at: float
    started_at: float | None
    spec: DagSpec
    order: tuple[str, ...]
    tasks: dict[str, TaskMirror] = field(default_factory=dict)
    dirty_flag: bool = True  # read and set as ``dirty``
    # Where a run that turns dirty is noted (the book's ``dirty``), so a tick visits
    # the runs that changed instead of every run.
    dirty_sink: dict[int, RunMirror] | None = field(default=None, repr=False, compare=False)
    # evaluate/final_state kept up to date as tasks change (costs what changed)
    readiness: RunReadiness | None = None
    logical_date: float | None = None
    deadline_missed_at: float | None = None
    conf: dict[str, Any] = field(default_factory=dict)  # a mapped task may map over a key

    @classmethod
    def build(cls, row: RunRow, spec: DagSpec, tis: Sequence[TaskInstance]) -> RunMirror:
        mirror = cls(
            pk=row.pk,
            dag_id=row.dag_id,
            run_id=row.run_id,
            state=row.state,
            created_at=row.created_at,
            started_at=row.started_at,
            spec=spec,
            order=topological_order(spec),
            logical_date=row.logical_date,
            deadline_missed_at=row.deadline_missed_at,
            conf=row.conf,
        )
        for ti in tis:
            mirror.tasks[ti.task_id] = TaskMirror.from_row(ti)
        mirror.readiness = RunReadiness(spec, mirror.order, mirror.states())
        return mirror

    @property
    def dirty(self) -> bool:
        """Something about the run changed since it was last advanced."""
        return self.dirty_flag

    @dirty.setter
    def dirty(self, value: bool) -> None:
        self.dirty_flag = value
        if value and self.dirty_sink is not None:
            self.dirty_sink[self.pk] = self

    @property
    def run_order(self) -> float:
        """Its age for ``domain.runs.runs_to_start``: older runs start first."""
        return self.created_at

    def states(self) -> dict[str, TaskState]:
        return {task_id: ti.state for task_id, ti in self.tasks.items()}
