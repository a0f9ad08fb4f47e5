"""An in-memory AgentBackend: a test double of the scheduler's side, not of gRPC.

It keeps task instances, tickets (by hash only) and a journal of every write, so a
test can assert that a refused call wrote nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from leoflow.domain.credentials import issue_ticket
from leoflow.scheduler.agent_endpoint import Outcome, StartSpec, TaskSession, TicketUse
from leoflow.secrets import SecretBackend

TERMINAL = {"success", "failed"}


@dataclass
class FakeTI:
    ti_pk: int
    dag_id: str
    run_id: str
    task_id: str
    try_number: int = 1
    state: str = "queued"
    argv: list[str] = field(default_factory=lambda: ["true"])
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    timeout: float | None = None
    secrets: tuple[str, ...] = ()
    cancel_requested: bool = False
    executor_ref: str = ""
    log: bytearray = field(default_factory=bytearray)
    heartbeats: int = 0
    outcome: dict[str, Any] | None = None


@dataclass
class _Ticket:
    ti_pk: int
    try_number: int
    expires_at: float
    used: bool = False


class FakeBackend:
    def __init__(self, secrets: SecretBackend | None = None) -> None:
        self.tis: dict[int, FakeTI] = {}
        self.tickets: dict[str, _Ticket] = {}
        self.secrets = secrets
        self.journal: list[tuple[str, int, int]] = []  # (write, ti_pk, try)
        self.completed: dict[int, asyncio.Event] = {}
        self.session_calls = 0
        self.starts = 0

    # -- test setup --------------------------------------------------------------------

    def add(self, ti: FakeTI) -> FakeTI:
        self.tis[ti.ti_pk] = ti
        self.completed.setdefault(ti.ti_pk, asyncio.Event())
        return ti

    def ticket(self, ti: FakeTI, *, expires_at: float = 4e9) -> str:
        plain, digest = issue_ticket()
        self.tickets[digest] = _Ticket(ti.ti_pk, ti.try_number, expires_at)
        return plain

    def writes_for(self, ti_pk: int) -> list[tuple[str, int, int]]:
        return [w for w in self.journal if w[1] == ti_pk]

    # -- AgentBackend ------------------------------------------------------------------

    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        t = self.tickets.get(ticket_hash)
        if t is None:
            return TicketUse("unknown", None, None)
        if t.used:
            return TicketUse("replayed", t.ti_pk, t.try_number)
        if now >= t.expires_at:
            return TicketUse("expired", t.ti_pk, t.try_number)
        t.used = True
        self.journal.append(("consume_ticket", t.ti_pk, t.try_number))
        return TicketUse("ok", t.ti_pk, t.try_number)

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        self.session_calls += 1
        ti = self.tis.get(ti_pk)
        if ti is None or ti.try_number != try_number or ti.state in TERMINAL:
            return None
        return TaskSession(ti.ti_pk, ti.try_number, ti.dag_id, ti.run_id, ti.task_id, ti.secrets)

    async def start(self, s: TaskSession, *, executor_ref: str) -> StartSpec:
        ti = self.tis[s.ti_pk]
        self.starts += 1
        ti.state = "running"
        ti.executor_ref = executor_ref
        self.journal.append(("start", s.ti_pk, s.try_number))
        return StartSpec(list(ti.argv), dict(ti.env), ti.cwd, ti.timeout)

    async def heartbeat(self, s: TaskSession) -> bool:
        ti = self.tis[s.ti_pk]
        ti.heartbeats += 1
        self.journal.append(("heartbeat", s.ti_pk, s.try_number))
        return ti.cancel_requested

    async def append_log(self, s: TaskSession, data: bytes) -> None:
        self.tis[s.ti_pk].log += data
        self.journal.append(("append_log", s.ti_pk, s.try_number))

    async def log_size(self, s: TaskSession) -> int:
        return len(self.tis[s.ti_pk].log)

    async def complete(self, s: TaskSession, outcome: Outcome) -> None:
        ti = self.tis[s.ti_pk]
        ti.state = "success" if outcome.exit_code == 0 else "failed"
        ti.outcome = {
            "exit_code": outcome.exit_code,
            "oom_killed": outcome.oom_killed,
            "timed_out": outcome.timed_out,
            "message": outcome.message,
        }
        if outcome.not_started:
            ti.outcome["not_started"] = True
        self.journal.append(("complete", s.ti_pk, s.try_number))
        self.completed[s.ti_pk].set()

    async def resolve_secret(self, s: TaskSession, name: str) -> str | None:
        assert name in s.secrets, "the endpoint must only ask for declared names"
        self.journal.append(("resolve_secret", s.ti_pk, s.try_number))
        return None if self.secrets is None else await self.secrets.get(name)
