"""The task instance: one record of one task in one run, as the store holds it.

The one shape every layer shares: the store returns it, the API adapts it
(``model_validate(..., from_attributes=True)``), *why is it waiting* reads it,
and the scheduler's mutable mirror copies its fields from it by name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

from leoflow.domain.admission import Candidate
from leoflow.domain.states import TaskState


@dataclass(frozen=True, slots=True)
class TaskInstance:
    pk: int
    run_pk: int
    dag_id: str
    run_id: str
    task_id: str
    state: TaskState
    try_number: int
    max_tries: int
    pool: str
    pool_slots: int
    priority: int
    ready_at: float | None
    queued_at: float | None
    started_at: float | None
    ended_at: float | None
    next_retry_at: float | None
    heartbeat_at: float | None
    exit_code: int | None
    reason: str | None
    message: str | None
    executor_ref: str | None
    updated_at: float
    # The last successful try's output (JSON text), and a mapped item's item (JSON text).
    output: str | None = None
    map_item: str | None = None


TASK_INSTANCE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskInstance))


class Admissible(Protocol):
    """What admission needs of a task instance (the record, or the scheduler's mirror)."""

    @property
    def pk(self) -> int: ...
    @property
    def pool(self) -> str: ...
    @property
    def pool_slots(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def ready_at(self) -> float | None: ...


def candidate(ti: Admissible, dag_id: str, run_order: float) -> Candidate:
    """The task instance as admission sees it; ``run_order`` is its run's age."""
    return Candidate(
        key=ti.pk,
        dag_id=dag_id,
        pool=ti.pool,
        pool_slots=max(1, ti.pool_slots),
        priority=ti.priority,
        run_order=run_order,
        ready_order=ti.ready_at or 0.0,
    )
