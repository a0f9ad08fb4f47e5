"""Clear records: requests to clear a task of a running run, and the finished-run clear.

A running run's task instances are the leading scheduler's to change (its book
must never disagree with the store), so the API only records a request here and
the scheduler applies it (``leoflow/scheduler/clears.py``), stamping the outcome.
A finished run has no scheduler driving it, so its clear is written at once
(``clear_finished_run``), task instances first, then the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.clearing import cleared_fields
from leoflow.domain.dag import DagSpec
from leoflow.domain.states import TASK_TERMINAL, RunState, TaskState
from leoflow.store.rows import RunRow, TaskChange, TaskInstanceRow
from leoflow.store.schema import clear_requests
from leoflow.store.store import Store

_req = clear_requests.c


class ClearLost(Exception):
    """The run or its task instances changed while the clear was written."""


@dataclass(frozen=True, slots=True)
class ClearRequest:
    pk: int
    run_pk: int
    task_id: str
    downstream: bool
    requested_by: str
    requested_at: float
    attempts: int
    applied_at: float | None
    outcome: str | None
    # ``clear``, ``clear_failed`` or a mark (``success``, ``failed``: domain/marking.py).
    action: str = "clear"
    upstream: bool = False


def _row(r: sa.Row[tuple[object, ...]]) -> ClearRequest:
    m = r._mapping
    return ClearRequest(
        pk=int(m["pk"]),
        run_pk=int(m["run_pk"]),
        task_id=str(m["task_id"]),
        downstream=bool(m["downstream"]),
        requested_by=str(m["requested_by"]),
        requested_at=float(m["requested_at"]),
        attempts=int(m["attempts"]),
        applied_at=None if m["applied_at"] is None else float(m["applied_at"]),
        outcome=None if m["outcome"] is None else str(m["outcome"]),
        action=str(m["action"]),
        upstream=bool(m["upstream"]),
    )


async def request_clear(
    store: Store,
    run_pk: int,
    task_id: str,
    *,
    downstream: bool,
    by: str,
    at: float,
    action: str = "clear",
    upstream: bool = False,
) -> ClearRequest:
    """Record a clear (or a mark) for the scheduler to apply (the API's side)."""

    def op(conn: Connection) -> ClearRequest:
        pk = conn.execute(
            sa.insert(clear_requests)
            .values(
                run_pk=run_pk,
                task_id=task_id,
                downstream=downstream,
                requested_by=by,
                requested_at=at,
                attempts=0,
                action=action,
                upstream=upstream,
            )
            .returning(_req.pk)
        ).scalar_one()
        return ClearRequest(
            int(pk), run_pk, task_id, downstream, by, at, 0, None, None, action, upstream
        )

    return await store._write(op, None)


async def pending_clears(store: Store) -> list[ClearRequest]:
    """The requests not applied yet, oldest first (one indexed read per poll)."""
    stmt = sa.select(clear_requests).where(_req.applied_at.is_(None)).order_by(_req.pk)

    def op(conn: Connection) -> list[ClearRequest]:
        return [_row(r) for r in conn.execute(stmt)]

    return await store._read(op)


async def get_clear(store: Store, pk: int) -> ClearRequest | None:
    def op(conn: Connection) -> ClearRequest | None:
        found = conn.execute(sa.select(clear_requests).where(_req.pk == pk)).first()
        return None if found is None else _row(found)

    return await store._read(op)


async def settle_clear(
    store: Store, pk: int, outcome: str, at: float, *, attempts: int, epoch: int | None
) -> None:
    """The scheduler applied the request (or gave up on it): stamp it, once."""

    def op(conn: Connection) -> None:
        conn.execute(
            sa.update(clear_requests)
            .where(_req.pk == pk, _req.applied_at.is_(None))
            .values(applied_at=at, outcome=outcome, attempts=attempts)
        )

    await store._write(op, epoch)


async def clear_finished_run(
    store: Store,
    run: RunRow,
    tis: Sequence[TaskInstanceRow],
    spec: DagSpec | None,
    names: Sequence[str],
    *,
    target: str,
    by: str,
    epoch: int | None,
) -> list[str]:
    """Clear the finished ones of ``names`` in a finished run and set the run going.

    Raises ClearLost if ``target`` (or the first finished task) changed meanwhile, or
    the run did."""
    by_id = {ti.task_id: ti for ti in tis}
    chosen = [by_id[n] for n in names if n in by_id and by_id[n].state in TASK_TERMINAL]
    changes = []
    for ti in chosen:
        task_spec = spec.tasks.get(ti.task_id) if spec is not None else None
        tries = task_spec.max_tries if task_spec is not None else 1
        fields = cleared_fields(ti.try_number, tries, f"cleared by {by}")
        changes.append(
            TaskChange(ti.pk, ti.state, TaskState.NONE, expected_try=ti.try_number, fields=fields)
        )
    return await write_and_restart(
        store,
        run,
        changes,
        [ti.task_id for ti in chosen],
        target=target,
        what=f"cleared by {by}",
        epoch=epoch,
    )


async def write_and_restart(
    store: Store,
    run: RunRow,
    changes: Sequence[TaskChange],
    names: Sequence[str],
    *,
    target: str,
    what: str,
    epoch: int | None,
) -> list[str]:
    """Write a finished run's task changes (``names``: their tasks), then set the run
    running for the scheduler to carry on and end it again by its tasks' states.

    Raises ClearLost if the first change (``target``'s) lost its race, or the run changed."""
    # Task instances first, then the run: a scheduler never sees a running run whose
    # tasks are all still finished (it would finish the run again at once).
    results = await store.transition_tasks(changes, epoch=epoch)
    if not results or not results[0]:
        raise ClearLost(f"task {target!r} changed meanwhile; nothing was changed")
    done = [name for name, ok in zip(names, results, strict=True) if ok]
    if not await store.transition_run(
        run.pk,
        run.state,
        RunState.RUNNING,
        epoch=epoch,
        ended_at=None,
        message=f"tasks {what}: {', '.join(done)}",
    ):
        current = await store.get_run(run.pk)
        if current is None or current.state is not RunState.RUNNING:
            state = current.state.value if current is not None else "gone"
            raise ClearLost(f"run {run.run_id!r} changed meanwhile (now {state})")
    return done
