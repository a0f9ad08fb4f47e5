"""A session token the endpoint issues is trusted without verifying its MAC again,
but only that token, and only until it expires."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from leoflow.domain import credentials
from leoflow.protocol.agent_v1 import pb
from leoflow.scheduler import agent_ops
from leoflow.scheduler.agent_backend import TaskSession, TicketUse
from leoflow.scheduler.agent_ops import AgentOps, Refuse

KEY = b"k" * 32


class Backend:
    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        return TicketUse("ok", 7, 1)

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        return TaskSession(ti_pk, try_number, "dag", "run", "task", ())


async def test_an_issued_token_is_trusted_until_it_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = AgentOps(Backend(), KEY, session_ttl=60.0, heartbeat=10.0)  # type: ignore[arg-type]
    token = (await ops.exchange(pb.ExchangeRequest(ticket="t"), "peer")).session_token
    verified: list[str] = []
    real = credentials.verify_session

    def counting(text: str, key: bytes, now: float) -> Any:
        verified.append(text)
        return real(text, key, now)

    monkeypatch.setattr(f"{agent_ops.__name__}.verify_session", counting)
    claims = ops.claims(token)
    assert (claims.ti_pk, claims.try_number) == (7, 1)
    assert verified == []  # issued here: not verified again
    body, mac = token.rsplit(".", 1)
    forged = body + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
    with pytest.raises(Refuse) as refused:
        ops.claims(forged)
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert verified == [forged]
    later = time.time() + 61.0
    monkeypatch.setattr("time.time", lambda: later)
    with pytest.raises(Refuse):
        ops.claims(token)
