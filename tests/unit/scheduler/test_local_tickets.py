"""The tickets Lite keeps in memory follow the store's rules: once, before expiry, a
second use is a replay, and a hash not issued here is left to the store."""

from __future__ import annotations

from leoflow.scheduler import local_tickets
from leoflow.scheduler.agent_backend import TicketUse
from leoflow.scheduler.local_tickets import LocalTickets


def test_a_ticket_works_once_then_is_a_replay() -> None:
    tickets = LocalTickets()
    tickets.add("h1", 7, 2, expires_at=100.0, now=0.0)
    assert tickets.consume("h1", 10.0) == TicketUse("ok", 7, 2)
    assert tickets.consume("h1", 11.0) == TicketUse("replayed", 7, 2)
    assert len(tickets) == 0


def test_an_expired_ticket_stays_expired_and_unused() -> None:
    tickets = LocalTickets()
    tickets.add("h1", 7, 1, expires_at=100.0, now=0.0)
    assert tickets.consume("h1", 100.0) == TicketUse("expired", 7, 1)
    assert tickets.consume("h1", 150.0) == TicketUse("expired", 7, 1)


def test_a_hash_not_issued_here_is_not_answered_here() -> None:
    tickets = LocalTickets()
    tickets.add("h1", 7, 1, expires_at=100.0, now=0.0)
    assert tickets.consume("forged", 1.0) is None
    assert tickets.consume("h1", 1.0) == TicketUse("ok", 7, 1)  # untouched by the miss


def test_unused_tickets_long_expired_are_purged_as_more_are_issued() -> None:
    tickets = LocalTickets()
    tickets.add("old", 1, 1, expires_at=10.0, now=0.0)
    tickets.add("fresh", 2, 1, expires_at=10_000.0, now=0.0)
    for i in range(local_tickets.PURGE_EVERY - 3):
        tickets.add(f"h{i}", 3, 1, expires_at=20_000.0, now=10.0)
    assert tickets.consume("old", 11.0) == TicketUse("expired", 1, 1)  # not yet purged
    tickets.add("last", 4, 1, expires_at=20_000.0, now=10.0 + local_tickets.EXPIRED_KEPT)
    assert tickets.consume("old", 11.0) is None  # the 4096th issue purged it
    assert tickets.consume("fresh", 11.0) == TicketUse("ok", 2, 1)


def test_replays_are_told_apart_for_the_newest_used_tickets_only() -> None:
    tickets = LocalTickets()
    for i in range(local_tickets.USED_KEPT + 1):
        tickets.add(f"h{i}", i, 1, expires_at=100.0, now=0.0)
        assert tickets.consume(f"h{i}", 1.0) == TicketUse("ok", i, 1)
    assert tickets.consume("h0", 2.0) is None  # forgotten: the store says unknown
    assert tickets.consume("h1", 2.0) == TicketUse("replayed", 1, 1)
