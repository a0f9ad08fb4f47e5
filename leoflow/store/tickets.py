"""Agent ticket records: one-use credentials a task's agent trades for its first call.

Only the ticket's hash is stored. The scheduler writes a launch's tickets in the
same transaction as the launch (``transition_tasks``); ``consume_ticket`` uses
one exactly once.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.base import StoreBase
from leoflow.store.rows import TicketUse
from leoflow.store.schema import tickets

_ticket = tickets.c


class TicketRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._insert_ticket = sa.insert(tickets)
        self._consume_ticket = (
            sa.update(tickets)
            .where(
                _ticket.hash == sa.bindparam("b_hash"),
                _ticket.used_at.is_(None),
                _ticket.expires_at > sa.bindparam("b_now"),
            )
            .values(used_at=sa.bindparam("b_now"))
            .returning(_ticket.ti_pk, _ticket.try_number)
        )
        self._ticket_by_hash = sa.select(_ticket.ti_pk, _ticket.try_number, _ticket.used_at).where(
            _ticket.hash == sa.bindparam("b_hash")
        )

    async def insert_ticket(
        self, ticket_hash: str, ti_pk: int, try_number: int, expires_at: float
    ) -> None:
        params = {
            "hash": ticket_hash,
            "ti_pk": ti_pk,
            "try_number": try_number,
            "expires_at": expires_at,
        }

        def op(conn: Connection) -> None:
            conn.execute(self._insert_ticket, params)

        await self._write(op, None)

    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        """Use a ticket once. A failure says why: unknown, already used (replayed, even
        once it has also expired), or expired; ti_pk/try_number name the ticket's task."""

        def op(conn: Connection) -> TicketUse:
            row = conn.execute(self._consume_ticket, {"b_hash": ticket_hash, "b_now": now}).first()
            if row is not None:
                return TicketUse("ok", int(row[0]), int(row[1]))
            row = conn.execute(self._ticket_by_hash, {"b_hash": ticket_hash}).first()
            if row is None:
                return TicketUse("unknown", None, None)
            return TicketUse(
                "replayed" if row[2] is not None else "expired", int(row[0]), int(row[1])
            )

        return await self._write(op, None)
