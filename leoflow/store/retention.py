"""Retention: delete finished runs (and all they own) and expired tickets, in batches.

Each batch is its own short transaction, so pruning a large backlog never holds
a long lock: a scheduler sharing the database waits at most one batch. Only runs
in a terminal state (success, failed) that ended before the cutoff are touched;
a queued or running run is never selected, and on PostgreSQL the selected runs
are locked (FOR UPDATE) for the length of their batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RUN_TERMINAL
from leoflow.store.schema import dag_runs, log_chunks, task_instances, tickets
from leoflow.store.store import Store

DEFAULT_BATCH = 200
_TERMINAL = sorted(s.value for s in RUN_TERMINAL)


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

    def summary(self) -> str:
        return (
            f"{self.runs} run(s), {self.task_instances} task instance(s), "
            f"{self.log_chunks} log chunk(s), {self.tickets + self.expired_tickets} ticket(s)"
        )


def _count(conn: Connection, table: sa.Table, where: Any) -> int:
    query = sa.select(sa.func.count()).select_from(table).where(where)
    return int(conn.execute(query).scalar_one())


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
        sa.select(dag_runs.c.pk)
        .where(
            dag_runs.c.pk > after_pk,
            dag_runs.c.state.in_(_TERMINAL),
            dag_runs.c.ended_at.is_not(None),
            dag_runs.c.ended_at < cutoff,
        )
        .order_by(dag_runs.c.pk)
        .limit(batch)
    )
    if dag_id is not None:
        query = query.where(dag_runs.c.dag_id == dag_id)
    if not dry_run:
        query = query.with_for_update()
    run_pks: Sequence[int] = conn.execute(query).scalars().all()
    counts = PruneCounts()
    if not run_pks:
        return counts, None
    ti_pks = (
        conn.execute(sa.select(task_instances.c.pk).where(task_instances.c.run_pk.in_(run_pks)))
        .scalars()
        .all()
    )
    counts.runs = len(run_pks)
    counts.task_instances = len(ti_pks)
    if ti_pks:
        counts.log_chunks = _count(conn, log_chunks, log_chunks.c.ti_pk.in_(ti_pks))
        counts.tickets = _count(conn, tickets, tickets.c.ti_pk.in_(ti_pks))
    if not dry_run:
        if ti_pks:
            conn.execute(sa.delete(log_chunks).where(log_chunks.c.ti_pk.in_(ti_pks)))
            conn.execute(sa.delete(tickets).where(tickets.c.ti_pk.in_(ti_pks)))
            conn.execute(sa.delete(task_instances).where(task_instances.c.run_pk.in_(run_pks)))
        conn.execute(sa.delete(dag_runs).where(dag_runs.c.pk.in_(run_pks)))
    return counts, int(run_pks[-1])


def _ticket_batch(conn: Connection, *, now: float, batch: int, dry_run: bool) -> int:
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
    if expired and not dry_run:
        conn.execute(sa.delete(tickets).where(tickets.c.hash.in_(expired)))
    return len(expired)


async def prune(
    store: Store,
    *,
    older_than: float,
    dag_id: str | None = None,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    now: float | None = None,
) -> PruneCounts:
    """Delete runs that finished more than ``older_than`` seconds ago, and expired tickets.

    ``batch`` bounds the runs (and expired tickets) one transaction touches;
    ``dry_run`` counts what would go and deletes nothing.
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

        counts, last = await (store._read(op) if dry_run else store._write(op, None))
        if last is None:
            break
        total.add(counts)
        total.batches += 1
        total.largest_batch = max(total.largest_batch, counts.runs)
        after_pk = last
    if dag_id is None:
        if dry_run:

            def count_expired(conn: Connection) -> int:
                # Not those already counted with their (prunable) run.
                prunable = sa.select(task_instances.c.pk).where(
                    task_instances.c.run_pk.in_(
                        sa.select(dag_runs.c.pk).where(
                            dag_runs.c.state.in_(_TERMINAL), dag_runs.c.ended_at < cutoff
                        )
                    )
                )
                return _count(
                    conn,
                    tickets,
                    sa.and_(tickets.c.expires_at < moment, tickets.c.ti_pk.not_in(prunable)),
                )

            total.expired_tickets = await store._read(count_expired)
        else:
            while True:

                def expire(conn: Connection) -> int:
                    return _ticket_batch(conn, now=moment, batch=batch, dry_run=False)

                gone = await store._write(expire, None)
                if not gone:
                    break
                total.expired_tickets += gone
                total.batches += 1
                total.largest_batch = max(total.largest_batch, gone)
    return total
