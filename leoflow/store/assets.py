"""Asset records: who names each asset, its events, and asset-triggered runs.

Exactly once per consuming DAG: a DAG's consumption cursor (``asset_triggers``) is
compare-and-set in the transaction that creates the run it triggers, fenced by the
scheduler's epoch like every leader write. A scheduler that dies before that commit
leaves the cursor as it was (the next one creates the run); one that lost its office,
or a second replica that read the same cursor, fails the set and creates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.assets.refs import spec_refs
from leoflow.domain.stored_json import read_stored_conf
from leoflow.store.base import chunks, now
from leoflow.store.errors import StoreError
from leoflow.store.rows import RunRow, TaskInstanceRow, TaskSeed
from leoflow.store.runs import RunRecords
from leoflow.store.schema import asset_events, asset_refs, asset_run_events, asset_triggers

T = TypeVar("T")
_ev = asset_events.c
_ref = asset_refs.c
_trig = asset_triggers.c
# Of a flood of events on one asset, the newest this many are kept with the run they
# trigger (all of them count; the run names these).
TRIGGER_EVENTS_KEPT = 100


@dataclass(frozen=True)
class AssetEventRow:
    pk: int
    uri: str
    created_at: float
    source: str  # "task" or "api"
    dag_id: str | None
    run_id: str | None
    task_id: str | None
    try_number: int | None
    extra: dict[str, Any] | None
    created_by: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "uri": self.uri,
            "created_at": self.created_at,
            "source": self.source,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "try_number": self.try_number,
            "extra": self.extra,
            "created_by": self.created_by,
        }


@dataclass(frozen=True)
class TriggerState:
    floor: int
    cursors: dict[str, int]
    version: int

    def cursor(self, uri: str) -> int:
        return self.cursors.get(uri, self.floor)


class LostTrigger(StoreError):
    """Another scheduler (or an earlier term) consumed these events first."""


_EVENT_COLUMNS = (
    _ev.pk, _ev.uri, _ev.created_at, _ev.source, _ev.dag_id, _ev.run_id, _ev.task_id,
    _ev.try_number, _ev.extra, _ev.created_by,
)  # fmt: skip


def _event_row(r: Sequence[Any]) -> AssetEventRow:
    extra = read_stored_conf(r[8]) if r[8] else None
    return AssetEventRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], extra or None, r[9])


class AssetRecords(RunRecords):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._add_api_event = (
            self._insert(asset_events)
            .on_conflict_do_nothing(index_elements=[_ev.idempotency_key])
            .returning(_ev.pk)
        )
        self._add_trigger = self._insert(asset_triggers).on_conflict_do_nothing(
            index_elements=[_trig.dag_id]
        )

    # ------------------------------------------------------------------ refs

    def _dag_stored(self, conn: Connection, dag_id: str, spec_json: str) -> None:
        """The DAG's asset rows as its new spec says, in the DAG's own write."""
        spec = json.loads(spec_json)
        refs = spec_refs(spec)
        conn.execute(sa.delete(asset_refs).where(_ref.dag_id == dag_id))
        if refs:
            rows = [{"dag_id": dag_id, "uri": u, "role": r, "task_id": t} for u, r, t in refs]
            self._insert_many(conn, sa.insert(asset_refs), rows)
        if spec.get("asset_schedule"):
            # Events before the DAG was scheduled on assets never trigger it.
            floor = conn.execute(sa.select(sa.func.max(_ev.pk))).scalar() or 0
            row = {"dag_id": dag_id, "floor_event_pk": floor, "cursors": "{}", "version": 0}
            self._insert_one(conn, self._add_trigger, row)

    async def asset_known(self, uri: str) -> bool:
        def op(conn: Connection) -> bool:
            found = conn.execute(sa.select(_ref.uri).where(_ref.uri == uri).limit(1)).first()
            return found is not None

        return await self._read(op)

    async def list_asset_refs(self, uri: str | None = None) -> list[tuple[str, str, str, str]]:
        """``(uri, dag_id, role, task_id)`` of every asset (or one), by uri."""
        stmt = sa.select(_ref.uri, _ref.dag_id, _ref.role, _ref.task_id)
        if uri is not None:
            stmt = stmt.where(_ref.uri == uri)
        stmt = stmt.order_by(_ref.uri, _ref.dag_id, _ref.role, _ref.task_id)

        def op(conn: Connection) -> list[tuple[str, str, str, str]]:
            return [(r[0], r[1], r[2], r[3]) for r in conn.execute(stmt)]

        return await self._read(op)

    # ---------------------------------------------------------------- events

    async def add_asset_event(
        self,
        uri: str,
        *,
        extra: str | None,
        idempotency_key: str | None,
        created_by: str | None,
    ) -> tuple[AssetEventRow, bool]:
        """Record an external event; ``(event, True)``, or the event this idempotency
        key recorded before and False."""
        row = {
            "uri": uri, "created_at": now(), "source": "api", "extra": extra,
            "idempotency_key": idempotency_key, "created_by": created_by,
        }  # fmt: skip

        def op(conn: Connection) -> tuple[AssetEventRow, bool]:
            pk = self._insert_one(conn, self._add_api_event, row).scalar()
            created = pk is not None
            where = _ev.pk == pk if created else _ev.idempotency_key == idempotency_key
            found = conn.execute(sa.select(*_EVENT_COLUMNS).where(where)).one()
            return _event_row(found), created

        return await self._write(op, None)

    async def list_asset_events(
        self, *, uri: str | None = None, limit: int = 100, before_pk: int | None = None
    ) -> list[AssetEventRow]:
        """Events newest first; the last pk of a page as ``before_pk`` for the next."""
        stmt = sa.select(*_EVENT_COLUMNS)
        if uri is not None:
            stmt = stmt.where(_ev.uri == uri)
        if before_pk is not None:
            stmt = stmt.where(_ev.pk < before_pk)
        stmt = stmt.order_by(_ev.pk.desc()).limit(limit)

        def op(conn: Connection) -> list[AssetEventRow]:
            return [_event_row(r) for r in conn.execute(stmt)]

        return await self._read(op)

    async def last_asset_events(self, uris: Collection[str]) -> dict[str, AssetEventRow]:
        """Each asset's newest event (assets with none are absent)."""

        def rows(conn: Connection, chunk: Sequence[str]) -> Iterable[tuple[str, AssetEventRow]]:
            newest = sa.select(sa.func.max(_ev.pk)).where(_ev.uri.in_(chunk)).group_by(_ev.uri)
            for r in conn.execute(sa.select(*_EVENT_COLUMNS).where(_ev.pk.in_(newest))):
                yield r[1], _event_row(r)

        return await self._by_chunk(uris, rows)

    async def _by_chunk(
        self,
        keys: Collection[str],
        rows: Callable[[Connection, Sequence[str]], Iterable[tuple[str, T]]],
    ) -> dict[str, T]:
        """``rows`` read for ``keys`` a chunk at a time (bounded IN lists), in one read."""

        def op(conn: Connection) -> dict[str, T]:
            return {k: v for chunk in chunks(sorted(keys)) for k, v in rows(conn, chunk)}

        return await self._read(op)

    async def run_asset_events(self, run_pk: int) -> list[AssetEventRow]:
        """The events that triggered an asset-triggered run, oldest first."""
        linked = sa.select(asset_run_events.c.event_pk).where(asset_run_events.c.run_pk == run_pk)
        stmt = sa.select(*_EVENT_COLUMNS).where(_ev.pk.in_(linked)).order_by(_ev.pk)

        def op(conn: Connection) -> list[AssetEventRow]:
            return [_event_row(r) for r in conn.execute(stmt)]

        return await self._read(op)

    # -------------------------------------------------------------- triggers

    async def asset_trigger_states(self, dag_ids: Collection[str]) -> dict[str, TriggerState]:
        stmt = sa.select(_trig.dag_id, _trig.floor_event_pk, _trig.cursors, _trig.version)

        def rows(conn: Connection, chunk: Sequence[str]) -> Iterable[tuple[str, TriggerState]]:
            for r in conn.execute(stmt.where(_trig.dag_id.in_(chunk))):
                yield r[0], TriggerState(int(r[1]), json.loads(r[2]), int(r[3]))

        return await self._by_chunk(dag_ids, rows)

    async def newest_asset_event_pks(self, uris: Collection[str]) -> dict[str, int]:
        """Each asset's newest event pk: one aggregate per chunk, whatever the flood."""
        stmt = sa.select(_ev.uri, sa.func.max(_ev.pk)).group_by(_ev.uri)

        def rows(conn: Connection, chunk: Sequence[str]) -> Iterable[tuple[str, int]]:
            return ((r[0], int(r[1])) for r in conn.execute(stmt.where(_ev.uri.in_(chunk))))

        return await self._by_chunk(uris, rows)

    async def create_asset_run(
        self,
        dag_id: str,
        *,
        state: TriggerState,
        consumed: Mapping[str, int],
        tasks: Sequence[TaskSeed],
        epoch: int | None,
    ) -> tuple[RunRow, list[TaskInstanceRow]]:
        """An asset-triggered run, consuming each asset of ``consumed`` up to its event
        pk, in one transaction with the cursor's compare-and-set; LostTrigger if the
        cursor moved since ``state`` was read (nothing is written then)."""
        cursors = {**state.cursors, **consumed}
        update = (
            sa.update(asset_triggers)
            .where(_trig.dag_id == dag_id, _trig.version == state.version)
            .values(cursors=json.dumps(cursors, sort_keys=True), version=state.version + 1)
        )

        def also(conn: Connection, run_pk: int) -> None:
            if conn.execute(update).rowcount != 1:
                raise LostTrigger(f"the asset events of {dag_id} were consumed meanwhile")
            links: list[dict[str, int]] = []
            for uri, upto in consumed.items():
                picked = (
                    sa.select(_ev.pk)
                    .where(_ev.uri == uri, _ev.pk > state.cursor(uri), _ev.pk <= upto)
                    .order_by(_ev.pk.desc())
                    .limit(TRIGGER_EVENTS_KEPT)
                )
                links += [{"run_pk": run_pk, "event_pk": int(r[0])} for r in conn.execute(picked)]
            if links:
                self._insert_many(conn, sa.insert(asset_run_events), links)

        return await self._create_run(
            dag_id, None, "asset", None, {}, tasks, epoch, read_back=True, also=also
        )
