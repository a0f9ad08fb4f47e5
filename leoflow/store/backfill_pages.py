"""Backfill reads for pages and the API: many backfills' progress in one statement,
and a backfill's points with their runs in one join (not a read per run)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RunState
from leoflow.store.backfills import BackfillProgress
from leoflow.store.rows import RunRow
from leoflow.store.runs import _run_row
from leoflow.store.schema import backfill_points, dag_runs
from leoflow.store.store import Store

_pt = backfill_points.c
_run = dag_runs.c
# A point whose run was pruned since (``leoflow db prune``): neither pending nor live.
_GONE = "gone"
_PENDING = "pending"


@dataclass(frozen=True, slots=True)
class BackfillPoint:
    """One cron point of a backfill: its run, or None while the run is not made
    (``made`` tells a pruned run, made but gone, from a pending one)."""

    logical_date: float
    run: RunRow | None
    made: bool


def progress_from(counts: Counter[str]) -> BackfillProgress:
    return BackfillProgress(
        total=sum(counts.values()),
        pending=counts[_PENDING],
        queued=counts[RunState.QUEUED.value],
        running=counts[RunState.RUNNING.value],
        success=counts[RunState.SUCCESS.value],
        failed=counts[RunState.FAILED.value],
    )


def progress_of_points(points: Sequence[BackfillPoint]) -> BackfillProgress:
    counts: Counter[str] = Counter()
    for p in points:
        counts[p.run.state.value if p.run else (_GONE if p.made else _PENDING)] += 1
    return progress_from(counts)


async def progress_of(store: Store, pks: Collection[int]) -> dict[int, BackfillProgress]:
    """The progress of each backfill in ``pks``, in one grouped statement."""
    wanted = sorted(set(pks))
    if not wanted:
        return {}
    made = sa.case((_pt.run_pk.is_(None), _PENDING), else_=sa.func.coalesce(_run.state, _GONE))
    stmt = (
        sa.select(_pt.backfill_pk, made, sa.func.count())
        .select_from(backfill_points.outerjoin(dag_runs, _run.pk == _pt.run_pk))
        .where(_pt.backfill_pk.in_(wanted))
        .group_by(_pt.backfill_pk, made)
    )

    def op(conn: Connection) -> dict[int, Counter[str]]:
        out: dict[int, Counter[str]] = {pk: Counter() for pk in wanted}
        for pk, state, count in conn.execute(stmt):
            out[int(pk)][str(state)] += int(count)
        return out

    counts = await store._read(op)
    return {pk: progress_from(c) for pk, c in counts.items()}


async def backfill_points_with_runs(
    store: Store, pk: int, *, after: float | None = None, limit: int | None = None
) -> list[BackfillPoint]:
    """The backfill's points oldest first with their runs, in one join; ``after`` a
    logical date and ``limit`` page them."""
    stmt = (
        sa.select(_pt.logical_date, _pt.run_pk, dag_runs)
        .select_from(backfill_points.outerjoin(dag_runs, _run.pk == _pt.run_pk))
        .where(_pt.backfill_pk == pk)
        .order_by(_pt.logical_date)
    )
    if after is not None:
        stmt = stmt.where(_pt.logical_date > after)
    if limit is not None:
        stmt = stmt.limit(limit)

    def op(conn: Connection) -> list[BackfillPoint]:
        out = []
        for r in conn.execute(stmt):
            run = None if r[2] is None else _run_row(tuple(r)[2:])
            out.append(BackfillPoint(float(r[0]), run, r[1] is not None))
        return out

    return await store._read(op)
