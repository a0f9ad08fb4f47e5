"""The tickets of agents that dial this very process, kept in it instead of the store.

A ticket lets an agent open its task's session once (``AgentOps.exchange``). A pod's
agent may reach any replica, so its ticket is a store row that the launch's
transaction inserts and the Exchange's transaction uses. Lite's pool agent is this
process's own child and dials only this process's endpoint, where the scheduler that
issued the ticket lives for as long as the agent does: for its tickets those two
writes a task (a tenth of Lite's CPU in a fan-out) bought nothing a dict does not.

The rules are the store's: a ticket works once and only before it expires; a second
use is a replay (the endpoint raises its security alarm); an expired one stays
expired. A hash not known here is not answered here (None): the caller asks the
store, which says "unknown" for a forged one.
"""

from __future__ import annotations

from leoflow.scheduler.agent_backend import TicketUse

# Used tickets remembered to tell a replay from a forgery: a replay of one forgotten
# is refused all the same, as unknown.
USED_KEPT = 65_536
# Unused tickets (their agent died before its Exchange) are dropped once expired this
# long, checked every PURGE_EVERY issues.
EXPIRED_KEPT = 3600.0
PURGE_EVERY = 4096


class LocalTickets:
    def __init__(self) -> None:
        self._live: dict[str, tuple[int, int, float]] = {}  # hash -> ti_pk, try, expires
        self._used: dict[str, tuple[int, int]] = {}  # insertion order: oldest first
        self._issued = 0

    def __len__(self) -> int:
        return len(self._live)

    def add(
        self, ticket_hash: str, ti_pk: int, try_number: int, *, expires_at: float, now: float
    ) -> None:
        self._live[ticket_hash] = (ti_pk, try_number, expires_at)
        self._issued += 1
        if self._issued % PURGE_EVERY == 0:
            self.purge(now)

    def consume(self, ticket_hash: str, now: float) -> TicketUse | None:
        """Use the ticket: ok, replayed or expired; None when it is not one of ours."""
        entry = self._live.get(ticket_hash)
        if entry is None:
            used = self._used.get(ticket_hash)
            return None if used is None else TicketUse("replayed", *used)
        ti_pk, try_number, expires_at = entry
        if now >= expires_at:
            return TicketUse("expired", ti_pk, try_number)
        del self._live[ticket_hash]
        self._used[ticket_hash] = (ti_pk, try_number)
        if len(self._used) > USED_KEPT:
            del self._used[next(iter(self._used))]
        return TicketUse("ok", ti_pk, try_number)

    def purge(self, now: float) -> None:
        """Drop the unused tickets that expired more than ``EXPIRED_KEPT`` ago."""
        stale = [h for h, (_, _, expires) in self._live.items() if expires <= now - EXPIRED_KEPT]
        for ticket_hash in stale:
            del self._live[ticket_hash]
