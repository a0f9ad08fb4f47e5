"""Exchanges that arrive together use their tickets in one transaction (the agent
endpoint's ``TicketBatcher``), with the single-use answers ``consume_ticket`` gives."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from leoflow.scheduler.ticket_batch import TicketBatcher
from leoflow.store import Store, TicketUse

from .helpers import issue_ticket


async def test_consume_tickets_answers_each_hash(store: Store) -> None:
    await issue_ticket(store, "h-a", 1, 1, 1000.0)
    await issue_ticket(store, "h-b", 2, 3, 1000.0)
    await issue_ticket(store, "h-old", 3, 1, 10.0)
    assert await store.consume_ticket("h-b", 5.0) == TicketUse("ok", 2, 3)
    uses = await store.consume_tickets(["h-a", "h-b", "h-old", "nope", "h-a"], 500.0)
    assert uses == {
        "h-a": TicketUse("ok", 1, 1),
        "h-b": TicketUse("replayed", 2, 3),
        "h-old": TicketUse("expired", 3, 1),
        "nope": TicketUse("unknown", None, None),
    }
    assert await store.consume_ticket("h-a", 501.0) == TicketUse("replayed", 1, 1)


async def test_batcher_groups_concurrent_uses_and_refuses_a_twin(store: Store) -> None:
    for i in range(50):
        await issue_ticket(store, f"h{i}", 100 + i, 1, 1000.0)
    transactions: list[int] = []

    async def consume_many(hashes: Sequence[str], now: float) -> dict[str, TicketUse]:
        transactions.append(len(hashes))
        return await store.consume_tickets(hashes, now)

    batcher = TicketBatcher(consume_many)
    asked = [f"h{i}" for i in range(50)] + ["h7"]  # h7 twice: one use, one replay
    uses = await asyncio.gather(*(batcher.consume(h, 1.0) for h in asked))
    assert [u.ti_pk for u in uses[:50]] == [100 + i for i in range(50)]
    assert [u.status for u in uses[:50]] == ["ok"] * 50
    assert uses[50] == TicketUse("replayed", 107, 1)
    # All asked before the loop turned: one transaction for the lot.
    assert transactions == [51], transactions
    # One asked while a transaction is in flight waits for it, then goes with the others.
    for i in range(3):
        await issue_ticket(store, f"late{i}", 200 + i, 1, 1000.0)
    first = asyncio.create_task(batcher.consume("late0", 1.0))
    await asyncio.sleep(0)  # its transaction has begun
    rest = [batcher.consume("late1", 1.0), batcher.consume("late2", 1.0)]
    later = await asyncio.gather(first, *rest)
    assert [u.status for u in later] == ["ok"] * 3
    assert transactions[1:] == [1, 2], transactions
