"""The scheduler's in-memory picture of the runs it drives.

The store is the truth; the mirror is what the leader believes after its own
committed writes, so that a decision never needs a read. A compare-and-set
that fails means the picture is stale, and the run is reloaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leoflow.domain.dag import DagSpec
from leoflow.domain.progress import topological_order
from leoflow.domain.states import RunState, TaskState
from leoflow.store.rows import RunRow, TaskInstanceRow


@dataclass(slots=True)
class TaskMirror:
    pk: int
    run_pk: int
    task_id: str
    state: TaskState
    try_number: int
    max_tries: int
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
    cancel_requested: str | None = None
    cancel_sent: bool = False

    @classmethod
    def from_row(cls, row: TaskInstanceRow) -> TaskMirror:
        return cls(
            pk=row.pk,
            run_pk=row.run_pk,
            task_id=row.task_id,
            state=row.state,
            try_number=row.try_number,
            max_tries=row.max_tries,
            ready_at=row.ready_at,
            queued_at=row.queued_at,
            started_at=row.started_at,
            ended_at=row.ended_at,
            next_retry_at=row.next_retry_at,
            heartbeat_at=row.heartbeat_at,
            executor_ref=row.executor_ref,
            exit_code=row.exit_code,
            reason=row.reason,
            message=row.message,
        )


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
    dirty: bool = True
    logical_date: float | None = None
    deadline_missed_at: float | None = None

    @classmethod
    def build(cls, row: RunRow, spec: DagSpec, tis: list[TaskInstanceRow]) -> RunMirror:
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
        )
        for ti in tis:
            mirror.tasks[ti.task_id] = TaskMirror.from_row(ti)
        return mirror

    def states(self) -> dict[str, TaskState]:
        return {task_id: ti.state for task_id, ti in self.tasks.items()}
