"""Pool records: named slot budgets that admission draws on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.base import StoreBase, now
from leoflow.store.rows import PoolRow
from leoflow.store.schema import pools


class PoolRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        ins = self._insert(pools)
        self._upsert_pool = ins.on_conflict_do_update(
            index_elements=[pools.c.name],
            set_={
                "slots": ins.excluded.slots,
                "description": ins.excluded.description,
                "updated_at": ins.excluded.updated_at,
            },
        )

    async def upsert_pool(self, name: str, slots: int, description: str = "") -> None:
        params = {"name": name, "slots": slots, "description": description, "updated_at": now()}

        def op(conn: Connection) -> None:
            self._insert_one(conn, self._upsert_pool, params)

        await self._write(op, None)

    async def add_missing_pools(self, wanted: Mapping[str, tuple[int, str]]) -> list[str]:
        """Create each pool of ``wanted`` (name: slots, description) that has no row;
        one that has is left as it is. The names created, in order."""
        params: list[dict[str, Any]] = [
            {"name": name, "slots": slots, "description": text, "updated_at": now()}
            for name, (slots, text) in sorted(wanted.items())
        ]
        if not params:
            return []
        stmt = self._insert(pools).on_conflict_do_nothing(index_elements=[pools.c.name])

        def op(conn: Connection) -> list[str]:
            return [p["name"] for p in params if conn.execute(stmt, p).rowcount == 1]

        return await self._write(op, None)

    async def delete_pool(self, name: str) -> bool:
        stmt = sa.delete(pools).where(pools.c.name == name)

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, None)

    async def list_pools(self) -> list[PoolRow]:
        stmt = sa.select(pools).order_by(pools.c.name)

        def op(conn: Connection) -> list[PoolRow]:
            return [PoolRow(r[0], r[1], r[2], r[3]) for r in conn.execute(stmt)]

        return await self._read(op)
