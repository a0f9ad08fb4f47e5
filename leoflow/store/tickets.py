"""Agent ticket records: one-use credentials a task's agent trades for its first call.

Only the ticket's hash is stored. The scheduler writes a launch's tickets in the
same transaction as the launch (``transition_tasks``); ``consume_ticket`` uses
one exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.base import Expanded, StoreBase
from leoflow.store.rows import TicketUse
from leoflow.store.schema import tickets

_ticket = tickets.c


class TicketRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
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
        self._consume_tickets = Expanded(
            sa.update(tickets)
            .where(
                _ticket.hash.in_(sa.bindparam("b_hashes", expanding=True)),
                _ticket.used_at.is_(None),
                _ticket.expires_at > sa.bindparam("b_now"),
            )
            .values(used_at=sa.bindparam("b_now"))
            .returning(_ticket.hash, _ticket.ti_pk, _ticket.try_number),
            "b_hashes",
        )
        self._tickets_by_hash = Expanded(
            sa.select(_ticket.hash, _ticket.ti_pk, _ticket.try_number, _ticket.used_at).where(
                _ticket.hash.in_(sa.bindparam("b_hashes", expanding=True))
            ),
            "b_hashes",
        )

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

    async def consume_tickets(self, hashes: Sequence[str], now: float) -> dict[str, TicketUse]:
        """``consume_ticket`` for many distinct tickets in one transaction (the agent
        endpoint's Exchanges that arrived together); every hash gets its answer."""
        wanted = list(dict.fromkeys(hashes))

        def op(conn: Connection) -> dict[str, TicketUse]:
            out = {
                str(row[0]): TicketUse("ok", int(row[1]), int(row[2]))
                for row in self._consume_tickets.run(conn, {"b_now": now}, wanted)
            }
            missing = [h for h in wanted if h not in out]
            if missing:
                for row in self._tickets_by_hash.run(conn, {}, missing):
                    used = row[3] is not None
                    out[str(row[0])] = TicketUse(
                        "replayed" if used else "expired", int(row[1]), int(row[2])
                    )
            for h in missing:
                out.setdefault(h, TicketUse("unknown", None, None))
            return out

        return await self._write(op, None)
