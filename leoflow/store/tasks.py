"""Task-instance records: reads, and every state change as a compare-and-set.

``transition_tasks`` is the scheduler's group commit: many changes (and the
launches' agent tickets) in one transaction, the rows locked in pk order first.
Heartbeats and queue notes are not state changes but are guarded the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RunState, TaskState, check_run_transition, check_task_transition
from leoflow.store.asset_events import AssetEventWrites, TaskAssetEvent
from leoflow.store.base import (
    Expanded,
    Positional,
    check_fields,
    chunks,
    narrowed,
    now,
    state_params,
    state_update,
)
from leoflow.store.errors import StaleEpoch, StoreError
from leoflow.store.rows import RunChange, TaskChange, TaskInstanceRow
from leoflow.store.rows import task_instance_row as _ti_row
from leoflow.store.runs import RUN_FIELDS, run_update
from leoflow.store.schema import scheduler_epoch, task_instances, tickets
from leoflow.store.tries import TryRecords, kept_try, passes_a_try

TASK_FIELDS = frozenset(
    {
        "try_number",
        "ready_at",
        "queued_at",
        "started_at",
        "ended_at",
        "next_retry_at",
        "heartbeat_at",
        "exit_code",
        "reason",
        "message",
        "executor_ref",
        "max_tries",
        "output",
    }
)

_ti = task_instances.c
# The lock reads of up to this many rows keep their expanded SQL (``_lock_rows``).
_LOCK_SHAPES = 64

# What the batch's lock reads of each row beside its state, so that every row's UPDATE
# can set all of them (``transition_tasks``). Not ``output``: up to 64 KB a row, set
# only by a success; a change that sets it goes out in its own shape.
_KEPT = tuple(sorted(TASK_FIELDS - {"output"}))
_LOCKED = ("state", *_KEPT)  # a locked row as the batch reads it
_TRY_AT = _LOCKED.index("try_number")
_WRITE_CHUNK = 1000  # rows per UPDATE of a batch: its params are built a chunk at a time


@functools.cache
def _ti_update(keys: tuple[str, ...], with_try: bool) -> sa.Update:
    on_try = (_ti.try_number == sa.bindparam("b_try"),) if with_try else ()
    return state_update(task_instances, keys, *on_try, updated_at=sa.bindparam("b_now"))


def _change_params(
    change: TaskChange, keys: tuple[str, ...], expected: str, new: str, at: float
) -> dict[str, Any]:
    params = state_params(change.ti_pk, expected, new, keys, change.fields)
    params["b_now"] = at
    if change.expected_try is not None:
        params["b_try"] = change.expected_try
    return params


class _Lost(Exception):
    """A single transition lost its compare-and-set: roll back the try it kept."""


class TaskInstanceRecords(TryRecords, AssetEventWrites):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._ti_by_pk = sa.select(task_instances).where(_ti.pk == sa.bindparam("b_pk"))
        self._ti_by_pks = sa.select(task_instances).where(
            _ti.pk.in_(sa.bindparam("b_pks", expanding=True))
        )
        # The batch's fence rides on its lock: the epoch (share-locked, as ``_fence``
        # takes it) comes back with every row, a round trip less per tick. Taking
        # office only updates the epoch row, so it cannot deadlock with these locks.
        fence = sa.select(scheduler_epoch.c.epoch).where(scheduler_epoch.c.id == 1)
        if not self._sqlite:
            fence = fence.with_for_update(read=True)
        lock = (
            sa.select(_ti.pk, _ti.state, *(_ti[key] for key in _KEPT), fence.scalar_subquery())
            .where(_ti.pk.in_(sa.bindparam("b_pks", expanding=True)))
            .order_by(_ti.pk)
        )
        # Rows are locked in pk order, so two batches cannot deadlock each other.
        self._ti_lock = Expanded(
            lock if self._sqlite else lock.with_for_update(of=task_instances),
            "b_pks",
            shapes=_LOCK_SHAPES,
        )
        self._heartbeat = (
            sa.update(task_instances)
            .where(
                _ti.pk == sa.bindparam("b_pk"),
                _ti.state == TaskState.RUNNING.value,
                _ti.try_number == sa.bindparam("b_try"),
            )
            .values(heartbeat_at=sa.bindparam("b_at"))
        )
        self._launch_tickets = sa.insert(tickets)
        self._positional: dict[tuple[str, ...], Positional] = {}

    def _positional_update(self, keys: tuple[str, ...], conn: Connection) -> Positional:
        update = self._positional.get(keys)
        if update is None:
            update = self._positional[keys] = Positional(_ti_update(keys, True), conn.dialect)
        return update

    def _lock_rows(self, conn: Connection, pks: Sequence[int]) -> Any:
        """The batch's lock read (on SQLite as ``Expanded`` SQL: expanding ``IN`` and
        looking the statement up again was a fifth of a small batch's time)."""
        return self._ti_lock.run(conn, {}, pks)

    async def list_task_instances(
        self,
        *,
        run_pk: int | None = None,
        states: Collection[TaskState] | None = None,
        dag_id: str | None = None,
        limit: int | None = None,
        after_pk: int | None = None,
    ) -> list[TaskInstanceRow]:
        """Task instances in pk order; pass the last pk of a page as ``after_pk``."""
        stmt = narrowed(
            sa.select(task_instances),
            None if run_pk is None else _ti.run_pk == run_pk,
            None if dag_id is None else _ti.dag_id == dag_id,
            None if states is None else _ti.state.in_(sorted(TaskState(s).value for s in states)),
            None if after_pk is None else _ti.pk > after_pk,
        ).order_by(_ti.pk)
        if limit is not None:
            stmt = stmt.limit(limit)

        def op(conn: Connection) -> list[TaskInstanceRow]:
            return [_ti_row(row) for row in conn.execute(stmt)]

        return await self._read(op)

    async def get_task_instance(self, ti_pk: int) -> TaskInstanceRow | None:
        def op(conn: Connection) -> TaskInstanceRow | None:
            row = conn.execute(self._ti_by_pk, {"b_pk": ti_pk}).first()
            return None if row is None else _ti_row(row)

        return await self._read(op)

    async def get_task_instances(self, ti_pks: Collection[int]) -> list[TaskInstanceRow]:
        """The given task instances (those that exist), ordered by pk."""
        pks = sorted(set(ti_pks))

        def op(conn: Connection) -> list[TaskInstanceRow]:
            rows: list[TaskInstanceRow] = []
            for chunk in chunks(pks):
                rows.extend(_ti_row(r) for r in conn.execute(self._ti_by_pks, {"b_pks": chunk}))
            return sorted(rows, key=lambda r: r.pk)

        if not pks:
            return []
        return await self._read(op)

    async def transition_task(
        self,
        ti_pk: int,
        expected: TaskState,
        new: TaskState,
        *,
        epoch: int | None,
        expected_try: int | None = None,
        **fields: Any,
    ) -> bool:
        """Compare-and-set one task instance's state (and its try, if given);
        False if the row was not in ``expected`` (or not on ``expected_try``)."""
        change = TaskChange(ti_pk, TaskState(expected), TaskState(new), expected_try, fields)
        return await self.transition_task_with_events(change, (), epoch=epoch)

    async def transition_task_with_events(
        self, change: TaskChange, asset_events: Sequence[TaskAssetEvent], *, epoch: int | None
    ) -> bool:
        """``transition_task``; a success also records ``asset_events`` in its transaction."""
        ti_pk, expected_try, fields = change.ti_pk, change.expected_try, change.fields
        check_task_transition(change.expected, change.new)
        check_fields(fields, TASK_FIELDS, "transition_task")
        keys = tuple(sorted(fields))
        stmt = _ti_update(keys, expected_try is not None)
        params = _change_params(change, keys, change.expected.value, change.new.value, now())

        keeps = "try_number" in fields or change.new is TaskState.NONE

        def op(conn: Connection) -> bool:
            if keeps:
                # Under the write transaction, and undone with it if the CAS loses.
                self._keep_row_try(conn, ti_pk)
            if conn.execute(stmt, params).rowcount == 1:
                if change.new is TaskState.SUCCESS:
                    self._insert_task_events(conn, asset_events)
                return True
            if keeps:
                raise _Lost
            return False

        try:
            return await self._write(op, epoch)
        except _Lost:
            return False

    async def transition_tasks(
        self,
        changes: Sequence[TaskChange],
        *,
        epoch: int | None,
        tickets: Sequence[tuple[str, int, int]] = (),
        tickets_expire_at: float = 0.0,
    ) -> list[bool]:
        """Many compare-and-set transitions in one transaction; per-change success.

        The rows are locked and read first, so which changes win is known before
        writing; changes to one row apply in order (none->scheduled then
        scheduled->queued in one batch both succeed). An illegal transition anywhere
        in the batch refuses the whole batch before anything is written.
        """
        results, _ = await self.commit_batch(
            changes, (), epoch=epoch, tickets=tickets, tickets_expire_at=tickets_expire_at
        )
        return results

    async def commit_batch(
        self,
        changes: Sequence[TaskChange],
        runs: Sequence[RunChange],
        *,
        epoch: int | None,
        tickets: Sequence[tuple[str, int, int]] = (),
        tickets_expire_at: float = 0.0,
        asset_events: Sequence[TaskAssetEvent] = (),
    ) -> tuple[list[bool], list[bool]]:
        """``transition_tasks`` and runs' compare-and-sets (``transition_run``'s, in
        order, after the tasks') in the same transaction: a tick's commit. A run's
        start and end were a transaction (a BEGIN, a fence read and a commit) each.
        Per-change success of each."""
        if not changes and not tickets and not runs:
            return [], []
        run_params: list[tuple[sa.Update, dict[str, Any]]] = []
        for run in runs:
            expected, new = RunState(run.expected), RunState(run.new)
            check_run_transition(expected, new)
            check_fields(run.fields, RUN_FIELDS, "commit_batch")
            keys = tuple(sorted(run.fields))
            params = state_params(run.run_pk, expected.value, new.value, keys, run.fields)
            run_params.append((run_update(keys), params))
        ticket_rows = [
            {"hash": h, "ti_pk": pk, "try_number": t, "expires_at": tickets_expire_at}
            for h, pk, t in tickets
        ]
        for change in changes:
            check_task_transition(TaskState(change.expected), TaskState(change.new))
            check_fields(change.fields, TASK_FIELDS, "transition_tasks")
        at = now()
        pks = sorted({change.ti_pk for change in changes})

        def op(conn: Connection) -> tuple[list[bool], list[bool]]:
            # The locked rows as tuples (state, *_KEPT), and per changed row only what
            # the batch changed: a first tick of a 10,000-task fan-out holds 10,000 of
            # each, and full dicts of both (with every row's params beside them) were
            # ~25 MB of Lite's peak.
            locked: dict[int, tuple[Any, ...]] = {}
            fenced = False
            for chunk in chunks(pks):
                for found in self._lock_rows(conn, chunk):
                    if epoch is not None and not fenced:
                        if int(found[-1]) != epoch:
                            raise StaleEpoch(epoch, int(found[-1]))
                        fenced = True
                    locked[found[0]] = tuple(found[1:-1])
            if epoch is not None and not fenced:  # no row brought the epoch: ask alone
                self._fence(conn, epoch)

            # Each change is judged against the row as the changes before it in this
            # batch left it (none->scheduled then scheduled->queued both succeed), in
            # memory; then each row changed is written once, its end state and every
            # field from the locked row's values and its changes. Under the row locks
            # that is the same row as writing each change in turn, and the whole batch
            # is one UPDATE statement (two if some change sets ``output``) instead of
            # one per (change's depth in its row, set of fields): a tick's Completes,
            # Starts and the launches they free went out as three to five round trips.
            results = [False] * len(changes)
            changed: dict[int, tuple[str, Any, dict[str, Any]]] = {}  # state, try, fields
            for index, change in enumerate(changes):
                original = locked.get(change.ti_pk)
                if original is None:
                    continue
                state, try_number, fields = changed.get(
                    change.ti_pk, (original[0], original[_TRY_AT], {})
                )
                if state != TaskState(change.expected).value:
                    continue
                if change.expected_try is not None and try_number != change.expected_try:
                    continue
                results[index] = True
                fields = {**fields, **change.fields}
                new_try = fields.get("try_number", try_number)
                changed[change.ti_pk] = (TaskState(change.new).value, new_try, fields)

            order = list(changed)
            for start in range(0, len(order), _WRITE_CHUNK):
                groups: dict[bool, list[dict[str, Any]]] = {}
                kept: list[dict[str, Any]] = []  # tries this chunk moves past
                for pk in order[start : start + _WRITE_CHUNK]:
                    original_row = dict(zip(_LOCKED, locked[pk], strict=True))
                    state, new_try, fields = changed[pk]
                    if passes_a_try(
                        original_row["state"], original_row["try_number"], state, new_try
                    ):
                        kept.append(kept_try(pk, original_row))
                    row = {**original_row, **fields, "state": state}
                    params = state_params(pk, original_row["state"], state, _KEPT, row)
                    params["b_now"] = at
                    params["b_try"] = original_row["try_number"]
                    if "output" in row:
                        params["v_output"] = row["output"]
                    groups.setdefault("output" in row, []).append(params)
                self._keep(conn, kept)
                for with_output, batch in groups.items():
                    keys = (*_KEPT, "output") if with_output else _KEPT
                    if self._sqlite:
                        update = self._positional_update(keys, conn)
                        result = conn.exec_driver_sql(update.sql, update.rows(batch))
                    else:
                        result = conn.execute(_ti_update(keys, True), batch)
                    if result.rowcount >= 0 and result.rowcount != len(batch):
                        raise StoreError(
                            f"batch transition updated {result.rowcount} rows, "
                            f"expected {len(batch)}"
                        )
            succeeded = {
                pk for pk, (state, _, _) in changed.items() if state == TaskState.SUCCESS.value
            }
            self._insert_task_events(conn, [e for e in asset_events if e.ti_pk in succeeded])
            if ticket_rows:  # the launches' tickets, in the same transaction
                self._insert_many(conn, self._launch_tickets, ticket_rows)
            run_results = [conn.execute(stmt, params).rowcount == 1 for stmt, params in run_params]
            return results, run_results

        return await self._write(op, None)  # fenced in ``op``, with the lock

    async def heartbeat(self, ti_pk: int, try_number: int, at: float) -> bool:
        """Record an agent's heartbeat; only for a running instance on that try."""
        params = {"b_pk": ti_pk, "b_try": try_number, "b_at": at}

        def op(conn: Connection) -> bool:
            return conn.execute(self._heartbeat, params).rowcount == 1

        return await self._write(op, None)

    async def note_queued(
        self,
        ti_pk: int,
        try_number: int,
        reason: str | None,
        message: str | None,
        *,
        epoch: int | None,
    ) -> bool:
        """Say why a queued try waits for its executor (None, None: it no longer does).

        Not a state change: only a queued instance on that try, under the leader's epoch.
        """
        stmt = (
            sa.update(task_instances)
            .where(
                _ti.pk == ti_pk,
                _ti.state == TaskState.QUEUED.value,
                _ti.try_number == try_number,
            )
            .values(reason=reason, message=message, updated_at=now())
        )

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, epoch)
