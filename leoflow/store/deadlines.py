"""Run deadlines: the moment a run was found past its DAG's ``deadline``, kept once."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.schema import dag_runs
from leoflow.store.store import Store

_run = dag_runs.c


async def mark_deadline_missed(store: Store, run_pk: int, at: float, *, epoch: int | None) -> bool:
    """Record the miss; False if it was recorded before (by an earlier term, say)."""

    def op(conn: Connection) -> bool:
        result = conn.execute(
            sa.update(dag_runs)
            .where(_run.pk == run_pk, _run.deadline_missed_at.is_(None))
            .values(deadline_missed_at=at)
        )
        return bool(result.rowcount == 1)

    return await store._write(op, epoch)
