"""Retention records: delete finished runs (and all they own) and expired tickets, in batches.

Each batch is its own short transaction, so pruning a large backlog never holds
a long lock: a scheduler sharing the database waits at most one batch (and
``between`` lets its writes in between batches). Only runs in a terminal state
(success, failed) that ended before the cutoff are touched, and not one whose
task instance is still queued or running; a queued or running run is never
selected, and on PostgreSQL the selected runs are locked (FOR UPDATE) for the
length of their batch.

Each DAG's latest scheduled run stays, however old (as Airflow's ``db clean``
keeps it): cron counts the next run from it, and a DAG with catchup would
otherwise create its runs from the start date again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RUN_TERMINAL, TASK_HOLDS_SLOTS
from leoflow.domain.words import plural
from leoflow.store.base import StoreBase
from leoflow.store.schema import dag_runs, log_chunks, task_instances, tickets

DEFAULT_BATCH = 200
_TERMINAL = sorted(s.value for s in RUN_TERMINAL)
_LIVE_TASK = sorted(s.value for s in TASK_HOLDS_SLOTS)
_run = dag_runs.c
_ti = task_instances.c


@dataclass
class PruneCounts:
    runs: int = 0
    task_instances: int = 0
    log_chunks: int = 0
    tickets: int = 0
    expired_tickets: int = 0
    batches: int = 0
    largest_batch: int = field(default=0)

    def add(self, other: PruneCounts) -> None:
        self.runs += other.runs
        self.task_instances += other.task_instances
        self.log_chunks += other.log_chunks
        self.tickets += other.tickets
        self.expired_tickets += other.expired_tickets

    def note_batch(self, size: int) -> None:
        self.batches += 1
        self.largest_batch = max(self.largest_batch, size)

    @property
    def rows(self) -> int:
        """Every row this prune deletes (or, dry, would)."""
        return (
            self.runs + self.task_instances + self.log_chunks + self.tickets + self.expired_tickets
        )

    def summary(self) -> str:
        return (
            f"{plural(self.runs, 'run')}, {plural(self.task_instances, 'task instance')}, "
            f"{plural(self.log_chunks, 'log chunk')}, "
            f"{plural(self.tickets + self.expired_tickets, 'ticket')}"
        )


def _count(conn: Connection, table: sa.Table, where: Any) -> int:
    query = sa.select(sa.func.count()).select_from(table).where(where)
    return int(conn.execute(query).scalar_one())


def _prunable(cutoff: float) -> sa.ColumnElement[bool]:
    """A run that finished before ``cutoff``, has no task instance still out, and is
    not its DAG's latest scheduled run."""
    live = sa.select(_ti.pk).where(_ti.run_pk == _run.pk, _ti.state.in_(_LIVE_TASK))
    later = dag_runs.alias("later")
    later_scheduled = sa.select(later.c.pk).where(
        later.c.dag_id == _run.dag_id,
        later.c.run_type == "scheduled",
        later.c.logical_date.is_not(None),
        sa.or_(
            later.c.logical_date > _run.logical_date,
            sa.and_(later.c.logical_date == _run.logical_date, later.c.pk > _run.pk),
        ),
    )
    return sa.and_(
        _run.state.in_(_TERMINAL),
        _run.ended_at.is_not(None),
        _run.ended_at < cutoff,
        ~sa.exists(live),
        sa.or_(
            _run.run_type != "scheduled", _run.logical_date.is_(None), sa.exists(later_scheduled)
        ),
    )


def _run_batch(
    conn: Connection,
    *,
    cutoff: float,
    dag_id: str | None,
    after_pk: int,
    batch: int,
    dry_run: bool,
) -> tuple[PruneCounts, int | None]:
    query = (
        sa.select(_run.pk)
        .where(_run.pk > after_pk, _prunable(cutoff))
        .order_by(_run.pk)
        .limit(batch)
    )
    if dag_id is not None:
        query = query.where(_run.dag_id == dag_id)
    if not dry_run:
        query = query.with_for_update()
    run_pks: Sequence[int] = conn.execute(query).scalars().all()
    counts = PruneCounts()
    if not run_pks:
        return counts, None
    ti_pks = conn.execute(sa.select(_ti.pk).where(_ti.run_pk.in_(run_pks))).scalars().all()
    counts.runs = len(run_pks)
    counts.task_instances = len(ti_pks)
    if ti_pks:
        counts.log_chunks = _count(conn, log_chunks, log_chunks.c.ti_pk.in_(ti_pks))
        counts.tickets = _count(conn, tickets, tickets.c.ti_pk.in_(ti_pks))
    if not dry_run:
        if ti_pks:
            conn.execute(sa.delete(log_chunks).where(log_chunks.c.ti_pk.in_(ti_pks)))
            conn.execute(sa.delete(tickets).where(tickets.c.ti_pk.in_(ti_pks)))
            conn.execute(sa.delete(task_instances).where(_ti.run_pk.in_(run_pks)))
        conn.execute(sa.delete(dag_runs).where(_run.pk.in_(run_pks)))
    return counts, int(run_pks[-1])


def _ticket_batch(conn: Connection, *, now: float, batch: int) -> int:
    expired = (
        conn.execute(
            sa.select(tickets.c.hash)
            .where(tickets.c.expires_at < now)
            .order_by(tickets.c.hash)
            .limit(batch)
        )
        .scalars()
        .all()
    )
    if expired:
        conn.execute(sa.delete(tickets).where(tickets.c.hash.in_(expired)))
    return len(expired)


def _count_expired(conn: Connection, *, now: float, cutoff: float) -> int:
    # Not those already counted with their (prunable) run.
    prunable = sa.select(_ti.pk).where(_ti.run_pk.in_(sa.select(_run.pk).where(_prunable(cutoff))))
    return _count(
        conn, tickets, sa.and_(tickets.c.expires_at < now, tickets.c.ti_pk.not_in(prunable))
    )


class RetentionRecords(StoreBase):
    async def prune(
        self,
        *,
        older_than: float,
        dag_id: str | None = None,
        dry_run: bool = False,
        batch: int = DEFAULT_BATCH,
        now: float | None = None,
        between: Callable[[], Awaitable[None]] | None = None,
    ) -> PruneCounts:
        """Delete runs that finished more than ``older_than`` seconds ago, and expired tickets.

        ``batch`` bounds the runs (and expired tickets) one transaction touches;
        ``between`` is awaited after each batch (the scheduler rests there, so its
        own writes get the database); ``dry_run`` counts what would go and deletes
        nothing.
        """
        if batch < 1:
            raise ValueError("batch must be at least 1")
        moment = time.time() if now is None else now
        cutoff = moment - older_than
        total = PruneCounts()
        after_pk = 0
        while True:

            def op(conn: Connection, after: int = after_pk) -> tuple[PruneCounts, int | None]:
                return _run_batch(
                    conn, cutoff=cutoff, dag_id=dag_id, after_pk=after, batch=batch, dry_run=dry_run
                )

            counts, last = await (self._read(op) if dry_run else self._write(op, None))
            if last is None:
                break
            total.add(counts)
            total.note_batch(counts.runs)
            after_pk = last
            if between is not None:
                await between()
        if dag_id is not None:
            return total  # --dag prunes that DAG's runs, nothing else
        if dry_run:
            total.expired_tickets = await self._read(
                lambda conn: _count_expired(conn, now=moment, cutoff=cutoff)
            )
            return total
        while gone := await self._write(
            lambda conn: _ticket_batch(conn, now=moment, batch=batch), None
        ):
            total.expired_tickets += gone
            total.note_batch(gone)
            if between is not None:
                await between()
        return total


async def prune(
    store: RetentionRecords,
    *,
    older_than: float,
    dag_id: str | None = None,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    now: float | None = None,
) -> PruneCounts:
    """``store.prune(...)``, for callers that hold the function (``leoflow db prune``)."""
    return await store.prune(
        older_than=older_than, dag_id=dag_id, dry_run=dry_run, batch=batch, now=now
    )
