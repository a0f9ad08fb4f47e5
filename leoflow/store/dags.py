"""DAG records: each DAG's spec as loaded, paused/active, and its file's last import error."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.catalogue import DagVersion
from leoflow.store.base import IN_CHUNK, StoreBase, chunks, now
from leoflow.store.rows import DagRow
from leoflow.store.schema import dag_import_errors, dags

_dag = dags.c
_err = dag_import_errors.c


def _dag_row(r: Sequence[Any]) -> DagRow:
    return DagRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7], r[8])


class DagRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        ins = self._insert(dags)
        self._upsert_dag = ins.on_conflict_do_update(
            index_elements=[_dag.dag_id],
            set_={
                "fileloc": ins.excluded.fileloc,
                "spec_json": ins.excluded.spec_json,
                "spec_hash": ins.excluded.spec_hash,
                "source": ins.excluded.source,
                "active": True,
                "updated_at": ins.excluded.updated_at,
            },
            where=sa.or_(
                _dag.spec_hash != ins.excluded.spec_hash,
                _dag.fileloc != ins.excluded.fileloc,
                _dag.source.is_distinct_from(ins.excluded.source),
                sa.not_(_dag.active),
            ),
        ).returning(_dag.dag_id)
        self._dag_select = sa.select(
            _dag.dag_id,
            _dag.fileloc,
            _dag.spec_json,
            _dag.spec_hash,
            _dag.source,
            _dag.paused,
            _dag.active,
            _dag.updated_at,
            _err.error,
        ).select_from(dags.outerjoin(dag_import_errors, _err.fileloc == _dag.fileloc))
        self._dag_fingerprint = sa.select(
            sa.func.count(),
            sa.func.sum(_dag.updated_at),
            sa.func.sum(sa.case((_dag.paused, 1), else_=0)),
            sa.func.sum(sa.case((_dag.active, 1), else_=0)),
        ).select_from(dags)
        self._dag_versions = sa.select(
            _dag.dag_id, _dag.spec_hash, _dag.paused, _dag.active
        ).order_by(_dag.dag_id)
        ins = self._insert(dag_import_errors)
        self._upsert_dag_error = ins.on_conflict_do_update(
            index_elements=[_err.fileloc],
            set_={"error": ins.excluded.error, "updated_at": ins.excluded.updated_at},
        )

    async def upsert_dag(
        self, dag_id: str, *, fileloc: str, spec_json: str, spec_hash: str, source: str | None
    ) -> bool:
        """Insert or update a DAG (re-activating it); True if inserted or changed.
        A paused DAG stays paused."""
        params = {
            "dag_id": dag_id,
            "fileloc": fileloc,
            "spec_json": spec_json,
            "spec_hash": spec_hash,
            "source": source,
            "paused": False,
            "active": True,
            "updated_at": now(),
        }

        def op(conn: Connection) -> bool:
            changed = self._insert_one(conn, self._upsert_dag, params).first() is not None
            if changed:
                self._dag_stored(conn, dag_id, spec_json)
            return changed

        return await self._write(op, None)

    def _dag_stored(self, conn: Connection, dag_id: str, spec_json: str) -> None:
        """More writes of a changed DAG's transaction (the asset records add theirs)."""

    async def get_dag(self, dag_id: str) -> DagRow | None:
        stmt = self._dag_select.where(_dag.dag_id == dag_id)

        def op(conn: Connection) -> DagRow | None:
            row = conn.execute(stmt).first()
            return None if row is None else _dag_row(row)

        return await self._read(op)

    async def list_dags(self) -> list[DagRow]:
        stmt = self._dag_select.order_by(_dag.dag_id)

        def op(conn: Connection) -> list[DagRow]:
            return [_dag_row(row) for row in conn.execute(stmt)]

        return await self._read(op)

    async def dag_fingerprint(self) -> tuple[Any, ...]:
        """Changes whenever any DAG row does (every write sets its updated_at): the
        scheduler's poll reads this one row and the DAGs only when it moved."""

        def op(conn: Connection) -> tuple[Any, ...]:
            return tuple(conn.execute(self._dag_fingerprint).one())

        return await self._read(op)

    async def list_dag_versions(self) -> list[DagVersion]:
        """Every DAG's id, spec hash and flags, without the spec itself."""

        def op(conn: Connection) -> list[DagVersion]:
            rows = conn.execute(self._dag_versions)
            return [DagVersion(r[0], r[1], bool(r[2]), bool(r[3])) for r in rows]

        return await self._read(op)

    async def get_dag_specs(self, dag_ids: Collection[str]) -> dict[str, tuple[str, str]]:
        """``dag_id -> (spec_hash, spec_json)`` for the given DAGs."""
        wanted = sorted(set(dag_ids))
        cols = (_dag.dag_id, _dag.spec_hash, _dag.spec_json)

        def op(conn: Connection) -> dict[str, tuple[str, str]]:
            found: dict[str, tuple[str, str]] = {}
            for chunk in chunks(wanted, IN_CHUNK):
                for r in conn.execute(sa.select(*cols).where(_dag.dag_id.in_(chunk))):
                    found[r[0]] = (r[1], r[2])
            return found

        return await self._read(op)

    async def set_dag_paused(self, dag_id: str, paused: bool) -> bool:
        """Pause or unpause; False if there is no such DAG."""
        stmt = sa.update(dags).where(_dag.dag_id == dag_id).values(paused=paused, updated_at=now())

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, None)

    async def set_dag_error(self, fileloc: str, error: str | None) -> None:
        """Record the import error of a DAG file, or clear it (``error=None``)."""

        def op(conn: Connection) -> None:
            if error is None:
                conn.execute(sa.delete(dag_import_errors).where(_err.fileloc == fileloc))
            else:
                row = {"fileloc": fileloc, "error": error, "updated_at": now()}
                self._insert_one(conn, self._upsert_dag_error, row)

        await self._write(op, None)

    async def list_dag_errors(self) -> list[tuple[str, str]]:
        """(fileloc, error) of every DAG file whose last import failed."""
        stmt = sa.select(_err.fileloc, _err.error).order_by(_err.fileloc)

        def op(conn: Connection) -> list[tuple[str, str]]:
            return [(str(r[0]), str(r[1])) for r in conn.execute(stmt)]

        return await self._read(op)

    async def delete_dag(self, dag_id: str) -> bool:
        """Forget a DAG (its run history stays); False if there was none. The scheduler
        sees the row gone and drops what the executor holds for it (its GC anchor)."""
        stmt = sa.delete(dags).where(_dag.dag_id == dag_id)

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, None)

    async def deactivate_dags_except(self, dag_ids: Collection[str]) -> None:
        """Mark every DAG not in ``dag_ids`` inactive; their history stays."""
        keep = sorted(set(dag_ids))

        def op(conn: Connection) -> None:
            if len(keep) <= IN_CHUNK:
                conn.execute(
                    sa.update(dags)
                    .where(_dag.active, _dag.dag_id.not_in(keep))
                    .values(active=False, updated_at=now())
                )
                return
            kept = set(keep)
            active = conn.execute(sa.select(_dag.dag_id).where(_dag.active)).scalars()
            gone = [dag_id for dag_id in active if dag_id not in kept]
            for chunk in chunks(gone):
                conn.execute(
                    sa.update(dags)
                    .where(_dag.dag_id.in_(chunk))
                    .values(active=False, updated_at=now())
                )

        await self._write(op, None)
