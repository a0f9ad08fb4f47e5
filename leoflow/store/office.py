"""Leadership records: the fencing epoch and the lease row (leadership without Kubernetes).

``take_office`` bumps the epoch; every fenced write after it refuses an older one
(``StoreBase._fence``). The lease row is written only by compare-and-set on its
version; ``store/leader.py`` runs the election over it.
"""

from __future__ import annotations

from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.base import StoreBase, now
from leoflow.store.rows import LeaseRow
from leoflow.store.schema import scheduler_epoch, scheduler_lease

_lease = scheduler_lease.c


class OfficeRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._take_office = (
            sa.update(scheduler_epoch)
            .where(scheduler_epoch.c.id == 1)
            .values(
                epoch=scheduler_epoch.c.epoch + 1,
                holder=sa.bindparam("b_holder"),
                updated_at=sa.bindparam("b_now"),
            )
            .returning(scheduler_epoch.c.epoch)
        )
        self._lease_read = sa.select(
            _lease.holder,
            _lease.acquire_time,
            _lease.renew_time,
            _lease.lease_duration,
            _lease.transitions,
            _lease.version,
        ).where(_lease.id == 1)

    async def take_office(self, holder: str) -> int:
        """Bump the fencing epoch and return the new one; older epochs are now stale."""
        params = {"b_holder": holder, "b_now": now()}

        def op(conn: Connection) -> int:
            return int(conn.execute(self._take_office, params).scalar_one())

        return await self._write(op, None)

    async def current_epoch(self) -> int:
        def op(conn: Connection) -> int:
            return int(conn.execute(self._epoch_read).scalar_one())

        return await self._read(op)

    async def get_lease(self) -> LeaseRow:
        """The scheduler lease row (leadership without Kubernetes)."""

        def op(conn: Connection) -> LeaseRow:
            r = conn.execute(self._lease_read).one()
            return LeaseRow(r[0], r[1], r[2], r[3], r[4], r[5])

        return await self._read(op, urgent=True)

    async def write_lease(self, expected_version: int, lease: LeaseRow) -> LeaseRow | None:
        """Compare-and-set the lease row on its version; the written row, or None if
        someone wrote it since ``expected_version`` was read."""
        written = replace(lease, version=expected_version + 1)

        def op(conn: Connection) -> bool:
            result = conn.execute(
                sa.update(scheduler_lease)
                .where(_lease.id == 1, _lease.version == expected_version)
                .values(
                    holder=written.holder,
                    acquire_time=written.acquire_time,
                    renew_time=written.renew_time,
                    lease_duration=written.lease_duration,
                    transitions=written.transitions,
                    version=written.version,
                )
            )
            return bool(result.rowcount == 1)

        return written if await self._write(op, None, urgent=True) else None
