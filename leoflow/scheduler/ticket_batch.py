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

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from leoflow.store.rows import TicketUse

ConsumeMany = Callable[[Sequence[str], float], Awaitable[dict[str, TicketUse]]]

# Hashes per transaction: far under any database's parameter limit.
MAX_BATCH = 500


class TicketBatcher:
    def __init__(self, consume_many: ConsumeMany) -> None:
        self._consume_many = consume_many
        self._pending: list[tuple[str, float, asyncio.Future[TicketUse]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def consume(self, ticket_hash: str, now: float) -> TicketUse:
        future: asyncio.Future[TicketUse] = asyncio.get_running_loop().create_future()
        self._pending.append((ticket_hash, now, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                uses = await self._consume_many(
                    [h for h, _, _ in batch], max(now for _, now, _ in batch)
                )
            except BaseException as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            seen: set[str] = set()
            for ticket_hash, _, future in batch:
                use = uses[ticket_hash]
                if ticket_hash in seen and use.status == "ok":
                    use = TicketUse("replayed", use.ti_pk, use.try_number)
                seen.add(ticket_hash)
                if not future.done():
                    future.set_result(use)
