"""Exchanges that arrive together use their tickets in one transaction.

A thousand pods starting at once each Exchange a ticket, and each use is a write
(a ticket works once, on any replica, so its use must be durable before the session
token is handed out). One transaction apiece queued the later ones behind the
connection pool for seconds (``benchmarks/bench_pro_scale.py``). Here a use waits
for the transaction in flight, if any, and then goes with every use that arrived
meanwhile: a group commit, so a lone Exchange still costs one transaction and no
more waiting than before.

A ticket presented twice in one batch is used by the first; the second is a replay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from leoflow.scheduler.coalesce import Coalescer
from leoflow.store.rows import TicketUse

ConsumeMany = Callable[[Sequence[str], float], Awaitable[dict[str, TicketUse]]]


class TicketBatcher:
    def __init__(self, consume_many: ConsumeMany) -> None:
        self._consume_many = consume_many
        self._calls: Coalescer[tuple[str, float], TicketUse] = Coalescer(self._batch)

    async def consume(self, ticket_hash: str, now: float) -> TicketUse:
        return await self._calls.call((ticket_hash, now))

    async def _batch(self, calls: Sequence[tuple[str, float]]) -> list[TicketUse]:
        uses = await self._consume_many([h for h, _ in calls], max(now for _, now in calls))
        seen: set[str] = set()
        out = []
        for ticket_hash, _ in calls:
            use = uses[ticket_hash]
            if ticket_hash in seen and use.status == "ok":
                use = TicketUse("replayed", use.ti_pk, use.try_number)
            seen.add(ticket_hash)
            out.append(use)
        return out
