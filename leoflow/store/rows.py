"""The store's rows: plain frozen dataclasses, one per table shape the callers see."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance

# The store's task-instance rows are the domain record itself.
TaskInstanceRow = TaskInstance


@dataclass(frozen=True, slots=True)
class DagRow:
    dag_id: str
    fileloc: str
    spec_json: str
    spec_hash: str
    source: str | None
    paused: bool
    active: bool
    updated_at: float
    # The import error of the DAG's file, if its last load failed.
    last_error: str | None


@dataclass(frozen=True, slots=True)
class RunRow:
    pk: int
    dag_id: str
    run_id: str
    state: RunState
    run_type: str
    logical_date: float | None
    conf: dict[str, Any]
    created_at: float
    started_at: float | None
    ended_at: float | None
    message: str | None
    deadline_missed_at: float | None = None


@dataclass(frozen=True, slots=True)
class PoolRow:
    name: str
    slots: int
    description: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class TaskSeed:
    """One task instance to create with a run."""

    task_id: str
    pool: str
    pool_slots: int
    priority: int
    max_tries: int


@dataclass(frozen=True, slots=True)
class TaskChange:
    """One compare-and-set transition in a batch (``Store.transition_tasks``)."""

    ti_pk: int
    expected: TaskState
    new: TaskState
    expected_try: int | None = None
    fields: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunChange:
    """One run's compare-and-set in a batch (``Store.transition_tasks``' ``runs``)."""

    run_pk: int
    expected: RunState
    new: RunState
    fields: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TicketUse:
    status: Literal["ok", "unknown", "replayed", "expired"]
    ti_pk: int | None
    try_number: int | None


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """The scheduler lease; ``holder`` is empty when nobody holds it."""

    holder: str
    acquire_time: float
    renew_time: float
    lease_duration: float
    transitions: int
    version: int


def task_instance_row(r: Sequence[Any]) -> TaskInstanceRow:
    """A ``task_instances`` row, its columns in table order."""
    return TaskInstanceRow(
        r[0], r[1], r[2], r[3], r[4], TaskState(r[5]), r[6], r[7], r[8], r[9], r[10], r[11],
        r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20], r[21], r[22], r[23],
    )  # fmt: skip
