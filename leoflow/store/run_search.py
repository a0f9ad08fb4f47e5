"""Runs found by what users ask of them: their state (a cancelled run apart from
the other failed ones, ``leoflow.domain.cancelled``), run type and a date range, newest first by
keyset (``pk < before``), one statement per page.

A run's date is its logical date, or when it was made for a run without one (a
manual trigger): the date the runs pages show.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.cancelled import RUN_MESSAGE_PREFIX
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.store.base import narrowed
from leoflow.store.rows import RunRow
from leoflow.store.runs import _run_row
from leoflow.store.schema import dag_runs, task_instances
from leoflow.store.store import Store

_run = dag_runs.c
_ti = task_instances.c
RUN_DATE = sa.func.coalesce(_run.logical_date, _run.created_at)
_CANCEL_MARK = sa.and_(
    _run.state == RunState.FAILED.value,
    sa.func.substr(_run.message, 1, len(RUN_MESSAGE_PREFIX)) == RUN_MESSAGE_PREFIX,
)


@dataclass(frozen=True)
class RunFilter:
    dag_id: str | None = None
    states: Collection[RunState] = field(default_factory=tuple)  # as stored
    # True: cancelled runs only; False: none of them; None: either.
    cancelled: bool | None = None
    run_types: Collection[str] = field(default_factory=tuple)
    date_from: float | None = None  # inclusive
    date_to: float | None = None  # exclusive


def _cancelled(cancelled: bool | None) -> sa.ColumnElement[bool] | None:
    if cancelled is None:
        return None
    # A NULL message is no cancel: coalesce, or NOT would leave the row out.
    return sa.func.coalesce(_CANCEL_MARK, False) == cancelled


async def find_runs(
    store: Store, which: RunFilter, *, limit: int, before: int | None
) -> list[RunRow]:
    """Up to ``limit`` runs matching ``which``, newest first, with pk below ``before``."""
    stmt = narrowed(
        sa.select(dag_runs),
        None if which.dag_id is None else _run.dag_id == which.dag_id,
        _run.state.in_(sorted(RunState(s).value for s in which.states)) if which.states else None,
        _cancelled(which.cancelled),
        _run.run_type.in_(sorted(which.run_types)) if which.run_types else None,
        None if which.date_from is None else which.date_from <= RUN_DATE,
        None if which.date_to is None else which.date_to > RUN_DATE,
        None if before is None else _run.pk < before,
    ).order_by(_run.pk.desc())
    stmt = stmt.limit(limit)

    def op(conn: Connection) -> list[RunRow]:
        return [_run_row(row) for row in conn.execute(stmt)]

    return await store._read(op)


async def cancelled_tasks(store: Store, run_pks: Collection[int]) -> dict[int, frozenset[str]]:
    """``run pk -> ids of its task instances a cancel failed`` (failed, reason
    cancelled), for a page's few runs: the grid and graph show them as cancelled."""
    pks = sorted(set(run_pks))
    if not pks:
        return {}
    stmt = sa.select(_ti.run_pk, _ti.task_id).where(
        _ti.run_pk.in_(pks),
        _ti.state == TaskState.FAILED.value,
        _ti.reason == EndReason.CANCELLED.value,
    )

    def op(conn: Connection) -> dict[int, frozenset[str]]:
        found: dict[int, set[str]] = {}
        for run_pk, task_id in conn.execute(stmt):
            found.setdefault(run_pk, set()).add(task_id)
        return {pk: frozenset(ids) for pk, ids in found.items()}

    return await store._read(op)
