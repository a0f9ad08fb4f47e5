"""Each try of a task instance but its latest (``task_tries``, migration 0008).

The task instance row holds its latest try. When a change moves the row past a try —
the next try begins (``try_number`` goes up) or a clear sends it back to ``none`` — the
try's facts are copied here first, in the same transaction as that change; a try
already kept stays as it was (a clear keeps the finished try; the next queue finds it
kept). A task that is never retried nor cleared writes nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import TaskState
from leoflow.store.base import StoreBase
from leoflow.store.schema import task_instances, task_tries

_ti = task_instances.c
_tt = task_tries.c
# What a kept try holds of its row (beside its state).
TRY_FACTS = (
    "queued_at",
    "started_at",
    "ended_at",
    "exit_code",
    "reason",
    "message",
    "executor_ref",
)


@dataclass(frozen=True, slots=True)
class TryRow:
    """One try's facts: the latest from its task instance, earlier ones as kept."""

    ti_pk: int
    try_number: int
    state: str  # the state it ended in (for the latest try: the row's state now)
    queued_at: float | None
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    reason: str | None
    message: str | None
    executor_ref: str | None


def passes_a_try(old_state: str, old_try: int, new_state: str, new_try: int) -> bool:
    """Whether a change from (``old_state``, ``old_try``) leaves a try behind."""
    if old_try < 1:
        return False
    return new_try > old_try or (new_state == TaskState.NONE.value and old_state != new_state)


# A row kept as its next try is queued stands in ``scheduled`` (or ``none``) by then;
# its reason still tells how the try ended.
_MOVED_ON = ("none", "scheduled", "queued")


def ended_as(state: str, reason: str | None) -> str:
    """The state a kept try ended in, from its row's state and reason when kept."""
    if state in _MOVED_ON and reason is not None:
        return TaskState.SUCCESS.value if reason == "success" else TaskState.UP_FOR_RETRY.value
    return state


def kept_try(ti_pk: int, row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``task_tries`` row of the try ``row`` (a locked task instance) holds."""
    state = ended_as(row["state"], row["reason"])
    kept = {"ti_pk": ti_pk, "try_number": row["try_number"], "state": state}
    kept.update((key, row[key]) for key in TRY_FACTS)
    return kept


class TryRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._keep_tries = self._insert(task_tries).on_conflict_do_nothing()
        columns = ("ti_pk", "try_number", "state", *TRY_FACTS)
        moved_on = sa.and_(_ti.state.in_(_MOVED_ON), _ti.reason.is_not(None))
        ended = sa.case(
            (sa.and_(moved_on, _ti.reason == "success"), TaskState.SUCCESS.value),
            (moved_on, TaskState.UP_FOR_RETRY.value),
            else_=_ti.state,
        )
        from_row = sa.select(_ti.pk, _ti.try_number, ended, *(_ti[key] for key in TRY_FACTS)).where(
            _ti.pk == sa.bindparam("b_pk"), _ti.try_number >= 1
        )
        self._keep_try_of_row = (
            self._insert(task_tries).from_select(columns, from_row).on_conflict_do_nothing()
        )
        self._tries_of = (
            sa.select(task_tries).where(_tt.ti_pk == sa.bindparam("b_pk")).order_by(_tt.try_number)
        )

    def _keep(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._insert_many(conn, self._keep_tries, rows)

    def _keep_row_try(self, conn: Connection, ti_pk: int) -> None:
        conn.execute(self._keep_try_of_row, {"b_pk": ti_pk})

    async def list_run_tries(self, run_pk: int) -> list[tuple[str, TryRow]]:
        """Every kept try of a run's task instances, with its task id."""
        stmt = (
            sa.select(_ti.task_id, task_tries)
            .join(task_instances, _ti.pk == _tt.ti_pk)
            .where(_ti.run_pk == run_pk)
            .order_by(_tt.ti_pk, _tt.try_number)
        )

        def op(conn: Connection) -> list[tuple[str, TryRow]]:
            return [(row[0], TryRow(*row[1:])) for row in conn.execute(stmt)]

        return await self._read(op)

    async def list_tries(self, ti_pk: int) -> list[TryRow]:
        """The tries kept of a task instance (all but its latest), oldest first."""

        def op(conn: Connection) -> list[TryRow]:
            return [TryRow(*row) for row in conn.execute(self._tries_of, {"b_pk": ti_pk})]

        return await self._read(op)
