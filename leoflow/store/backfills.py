"""Backfill records: a backfill, the cron points it covers, and the runs made for them.

A backfill is written whole (its row and every point) in one transaction, so a
refused one leaves nothing behind. The scheduler then makes each point's run as
room under the backfill's max_active_runs appears and links it here; a cancel
ends the backfill and fails its live runs in one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RunState
from leoflow.store.schema import backfill_points, backfills, dag_runs
from leoflow.store.store import Store

BACKFILL_STATES = ("running", "success", "failed", "cancelled")
_LIVE = (RunState.QUEUED.value, RunState.RUNNING.value)
_bf = backfills.c
_pt = backfill_points.c
_run = dag_runs.c


class BackfillConflict(Exception):
    """The DAG already has a running backfill."""


@dataclass(frozen=True, slots=True)
class BackfillRow:
    pk: int
    dag_id: str
    state: str
    range_start: float
    range_end: float
    reprocess_failed: bool
    max_active_runs: int
    created_by: str
    created_at: float
    ended_at: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    total: int
    pending: int  # points whose run is not made yet
    queued: int
    running: int
    success: int
    failed: int

    @property
    def active(self) -> int:
        return self.queued + self.running

    @property
    def done(self) -> int:
        return self.success + self.failed


def _row(r: Any) -> BackfillRow:
    return BackfillRow(
        r.pk, r.dag_id, r.state, r.range_start, r.range_end, bool(r.reprocess_failed),
        r.max_active_runs, r.created_by, r.created_at, r.ended_at, r.message,
    )  # fmt: skip


async def create_backfill(
    store: Store,
    *,
    dag_id: str,
    range_start: float,
    range_end: float,
    points: Sequence[float],
    reprocess_failed: bool,
    max_active_runs: int,
    created_by: str,
) -> BackfillRow:
    """The backfill and all its points, or BackfillConflict and nothing written."""
    if not points:
        raise ValueError("a backfill needs at least one cron point")
    now = time.time()
    values = {
        "dag_id": dag_id,
        "state": "running",
        "range_start": range_start,
        "range_end": range_end,
        "reprocess_failed": reprocess_failed,
        "max_active_runs": max_active_runs,
        "created_by": created_by,
        "created_at": now,
    }

    def op(conn: Connection) -> int:
        busy = conn.execute(
            sa.select(_bf.pk).where(_bf.dag_id == dag_id, _bf.state == "running").limit(1)
        ).scalar()
        if busy is not None:
            raise BackfillConflict(
                f"DAG {dag_id!r} already has a running backfill ({busy}); cancel it or "
                "wait for it to finish"
            )
        pk = int(conn.execute(sa.insert(backfills).values(values).returning(_bf.pk)).scalar_one())
        conn.execute(
            sa.insert(backfill_points),
            [{"backfill_pk": pk, "logical_date": p, "run_pk": None} for p in points],
        )
        return pk

    pk = await store._write(op, None)
    return BackfillRow(pk, **values, ended_at=None, message=None)  # type: ignore[arg-type]


async def get_backfill(store: Store, pk: int) -> BackfillRow | None:
    def op(conn: Connection) -> BackfillRow | None:
        row = conn.execute(sa.select(backfills).where(_bf.pk == pk)).first()
        return None if row is None else _row(row)

    return await store._read(op)


async def list_backfills(
    store: Store,
    *,
    dag_id: str | None = None,
    states: Collection[str] | None = None,
    limit: int = 100,
) -> list[BackfillRow]:
    """Newest first."""
    stmt = sa.select(backfills)
    if dag_id is not None:
        stmt = stmt.where(_bf.dag_id == dag_id)
    if states is not None:
        stmt = stmt.where(_bf.state.in_(sorted(states)))
    stmt = stmt.order_by(_bf.pk.desc()).limit(limit)

    def op(conn: Connection) -> list[BackfillRow]:
        return [_row(r) for r in conn.execute(stmt)]

    return await store._read(op)


async def backfill_progress(store: Store, pk: int) -> BackfillProgress:
    # A point whose run was pruned since (``leoflow db prune``) counts as neither
    # pending nor live: its run ended long ago.
    made = sa.case((_pt.run_pk.is_(None), "pending"), else_=sa.func.coalesce(_run.state, "gone"))
    stmt = (
        sa.select(made, sa.func.count())
        .select_from(backfill_points.outerjoin(dag_runs, _run.pk == _pt.run_pk))
        .where(_pt.backfill_pk == pk)
        .group_by(made)
    )

    def op(conn: Connection) -> dict[str, int]:
        return {state: int(count) for state, count in conn.execute(stmt)}

    counts = await store._read(op)
    total = sum(counts.values())
    return BackfillProgress(
        total=total,
        pending=counts.get("pending", 0),
        queued=counts.get(RunState.QUEUED.value, 0),
        running=counts.get(RunState.RUNNING.value, 0),
        success=counts.get(RunState.SUCCESS.value, 0),
        failed=counts.get(RunState.FAILED.value, 0),
    )


async def pending_points(store: Store, pk: int, limit: int) -> list[float]:
    """The oldest points whose run is not made yet."""
    stmt = (
        sa.select(_pt.logical_date)
        .where(_pt.backfill_pk == pk, _pt.run_pk.is_(None))
        .order_by(_pt.logical_date)
        .limit(limit)
    )

    def op(conn: Connection) -> list[float]:
        return [float(v) for v in conn.execute(stmt).scalars()]

    return await store._read(op)


async def backfill_runs(store: Store, pk: int) -> list[tuple[float, int | None]]:
    """Every point with its run's pk (None while not made), oldest first."""
    stmt = (
        sa.select(_pt.logical_date, _pt.run_pk)
        .where(_pt.backfill_pk == pk)
        .order_by(_pt.logical_date)
    )

    def op(conn: Connection) -> list[tuple[float, int | None]]:
        return [(float(d), None if r is None else int(r)) for d, r in conn.execute(stmt)]

    return await store._read(op)


async def link_run(
    store: Store, pk: int, logical_date: float, run_pk: int, *, epoch: int | None
) -> bool:
    """Record the point's run; False (and the run failed) if the backfill ended meanwhile."""
    now = time.time()

    def op(conn: Connection) -> bool:
        state = conn.execute(sa.select(_bf.state).where(_bf.pk == pk)).scalar()
        conn.execute(
            sa.update(backfill_points)
            .where(_pt.backfill_pk == pk, _pt.logical_date == logical_date)
            .values(run_pk=run_pk)
        )
        if state == "running":
            return True
        conn.execute(
            sa.update(dag_runs)
            .where(_run.pk == run_pk, _run.state.in_(_LIVE))
            .values(state=RunState.FAILED.value, ended_at=now, message="the backfill ended")
        )
        return False

    return await store._write(op, epoch)


async def finish_backfill(
    store: Store, pk: int, state: str, message: str | None, *, epoch: int | None
) -> bool:
    """A running backfill ends (success or failed); False if it was not running."""

    def op(conn: Connection) -> bool:
        result = conn.execute(
            sa.update(backfills)
            .where(_bf.pk == pk, _bf.state == "running")
            .values(state=state, ended_at=time.time(), message=message)
        )
        return bool(result.rowcount == 1)

    return await store._write(op, epoch)


async def cancel_backfill(store: Store, pk: int, who: str) -> int | None:
    """End a running backfill and fail its queued and running runs, at once.

    Returns how many runs were failed, None if the backfill was not running. The
    scheduler sees those runs end and stops their tasks, as for a run cancel.
    """
    now = time.time()
    message = f"cancelled with backfill {pk} by {who}"

    def op(conn: Connection) -> int | None:
        ended = conn.execute(
            sa.update(backfills)
            .where(_bf.pk == pk, _bf.state == "running")
            .values(state="cancelled", ended_at=now, message=f"cancelled by {who}")
        )
        if ended.rowcount != 1:
            return None
        runs = sa.select(_pt.run_pk).where(_pt.backfill_pk == pk, _pt.run_pk.is_not(None))
        result = conn.execute(
            sa.update(dag_runs)
            .where(_run.pk.in_(runs), _run.state.in_(_LIVE))
            .values(state=RunState.FAILED.value, ended_at=now, message=message)
        )
        return int(result.rowcount)

    return await store._write(op, None)


async def runs_in_range(
    store: Store, dag_id: str, start: float, end: float
) -> dict[float, list[RunState]]:
    """The states of the DAG's runs per logical date in ``[start, end]``."""
    stmt = sa.select(_run.logical_date, _run.state).where(
        _run.dag_id == dag_id, _run.logical_date >= start, _run.logical_date <= end
    )

    def op(conn: Connection) -> dict[float, list[RunState]]:
        out: dict[float, list[RunState]] = {}
        for date, state in conn.execute(stmt):
            out.setdefault(float(date), []).append(RunState(state))
        return out

    return await store._read(op)
