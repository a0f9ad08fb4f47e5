"""Attacks on the Channel stream, each over a real socket, each beside an honest task.

Every case sends, in the same batch on the same stream, the attacking item and items
of another task that is entitled to what it asks; the attacking item alone is refused
(its own status in its own reply), writes nothing, and the honest task's items are
answered and written as if the attack had not happened.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import pytest
from prometheus_client import REGISTRY

from leoflow.protocol.agent_v1 import method_path, pb

from .plane import Plane

OTHER_KEY = b"another-key-entirely-0123456789ab"
DENIED = grpc.StatusCode.PERMISSION_DENIED.value[0]
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED.value[0]
OK = 0


class Stream:
    """One raw Channel stream: send items, collect each one's reply by id."""

    def __init__(self, plane: Plane, agent_id: str = "attacker") -> None:
        self._call = plane.channel.stream_stream(
            method_path("Channel"),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.ReplyBatch.FromString,
        )(metadata=(("x-leoflow-agent", agent_id),), timeout=30)
        self._next = 0
        self.replies: dict[int, Any] = {}

    async def send(self, *items: tuple[str, Any, str]) -> list[Any]:
        """Items as (kind, message, token); their replies, in the same order."""
        batch = pb.AgentBatch()
        ids = []
        for kind, message, token in items:
            self._next += 1
            item = batch.items.add(id=self._next, session_token=token)
            getattr(item, kind).CopyFrom(message)
            ids.append(self._next)
        await self._call.write(batch)
        while not all(i in self.replies for i in ids):
            for reply in (await self._call.read()).replies:
                self.replies[reply.id] = reply
        return [self.replies[i] for i in ids]

    async def close(self) -> None:
        await self._call.done_writing()
        assert await self._call.code() == grpc.StatusCode.OK


def _log(data: bytes, offset: int = 0) -> Any:
    return pb.LogChunk(stream=pb.LogChunk.STDOUT, data=data, offset=offset)


def _honest(plane: Plane, ti_pk: int = 9) -> tuple[Any, str]:
    return plane.ti(ti_pk, state="running"), plane.token(ti_pk)


def _every_kind(token: str) -> list[tuple[str, Any, str]]:
    return [
        ("start", pb.StartRequest(), token),
        ("heartbeat", pb.HeartbeatRequest(), token),
        ("log", _log(b"evil"), token),
        ("resolve_secret", pb.ResolveSecretRequest(name="s"), token),
        ("complete", pb.CompleteRequest(exit_code=0), token),
    ]


async def _attack_beside_honest(
    plane: Plane, bad: list[tuple[str, Any, str]], expected_code: int
) -> None:
    """``bad`` refused with ``expected_code``, each; honest task 9 unharmed meanwhile."""
    honest, token = _honest(plane)
    written_before = len(plane.backend.journal)
    stream = Stream(plane)
    good_first = [("heartbeat", pb.HeartbeatRequest(), token), ("log", _log(b"a"), token)]
    good_last = [("log", _log(b"b", 1), token), ("complete", pb.CompleteRequest(), token)]
    replies = await stream.send(*good_first, *bad, *good_last)
    await stream.close()
    codes = [r.code for r in replies]
    assert codes == [OK, OK] + [expected_code] * len(bad) + [OK, OK], [
        (r.code, r.details) for r in replies
    ]
    assert all(r.details for r in replies[2 : 2 + len(bad)])
    assert bytes(honest.log) == b"ab" and honest.heartbeats == 1 and honest.state == "success"
    assert {w[1] for w in plane.backend.journal[written_before:]} == {9}


async def test_forged_tokens_are_refused_on_the_stream_alone(plane: Plane) -> None:
    victim = plane.ti(1, state="running")
    token = plane.token(1)
    version, payload, sig = token.split(".")
    bad = [
        *_every_kind(f"{version}.{payload}.{'A' * len(sig)}"),  # signature forged
        *_every_kind(plane.token(1, key=OTHER_KEY)),  # signed with another key
        *_every_kind("not-a-token"),
        *_every_kind(""),
    ]
    await _attack_beside_honest(plane, bad, UNAUTHENTICATED)
    assert victim.state == "running" and victim.log == b"" and victim.heartbeats == 0


async def test_a_replayed_ticket_is_refused_on_the_stream_alone(
    plane: Plane, caplog: pytest.LogCaptureFixture
) -> None:
    ti = plane.ti(1, dag_id="payroll", run_id="r9", task_id="export")
    ticket = plane.backend.ticket(ti)
    first = Stream(plane, "agent-1")
    (exchanged,) = await first.send(("exchange", pb.ExchangeRequest(ticket=ticket), ""))
    assert exchanged.code == OK and exchanged.exchange.session_token
    await first.close()
    before = REGISTRY.get_sample_value("leoflow_agent_ticket_replays_total") or 0.0
    with caplog.at_level(logging.WARNING, logger="leoflow.security"):
        await _attack_beside_honest(
            plane, [("exchange", pb.ExchangeRequest(ticket=ticket), "")], DENIED
        )
    assert REGISTRY.get_sample_value("leoflow_agent_ticket_replays_total") == before + 1
    assert "payroll/r9/export try 1" in caplog.text and ticket not in caplog.text
    assert ti.state == "queued"


async def test_a_token_acts_only_on_its_own_task_on_the_stream(plane: Plane) -> None:
    a = plane.ti(1, state="running")
    b = plane.ti(2, state="running", try_number=2)
    # A's token, and a token of B's previous try: neither reaches B's current try.
    stale = plane.token(2, try_number=1)
    await _attack_beside_honest(plane, _every_kind(stale), DENIED)
    assert b.state == "running" and b.log == b"" and b.heartbeats == 0 and b.outcome is None
    # Rewriting A's token to name B breaks its signature.
    version, _payload, sig = plane.token(1).split(".")
    forged = f"{version}.{plane.token(2, try_number=2).split('.')[1]}.{sig}"
    stream = Stream(plane)
    replies = await stream.send(*_every_kind(forged))
    await stream.close()
    assert {r.code for r in replies} == {UNAUTHENTICATED}
    assert plane.backend.writes_for(2) == [] and a.state == "running"


async def test_a_token_is_refused_on_the_stream_after_its_completion(plane: Plane) -> None:
    done = plane.ti(1, state="running")
    token = plane.token(1)
    stream = Stream(plane, "agent-1")
    (completed,) = await stream.send(("complete", pb.CompleteRequest(exit_code=0), token))
    assert completed.code == OK and not completed.complete.duplicate
    await stream.close()
    outcome = dict(done.outcome or {})
    await _attack_beside_honest(plane, _every_kind(token), DENIED)
    assert done.outcome == outcome and done.state == "success" and done.log == b""


async def test_only_the_same_item_resent_by_the_same_agent_counts_as_a_duplicate(
    plane: Plane,
) -> None:
    ti = plane.ti(1, state="running")
    token = plane.token(1)
    stream = Stream(plane, "agent-1")
    (first,) = await stream.send(("complete", pb.CompleteRequest(exit_code=0), token))
    await stream.close()
    assert first.code == OK
    # The same agent after a reconnect: the same id again is a duplicate, not a second end.
    again = Stream(plane, "agent-1")
    again._next = 0
    (resent,) = await again.send(("complete", pb.CompleteRequest(exit_code=0), token))
    await again.close()
    assert resent.code == OK and resent.complete.duplicate
    # Anyone else, or another id, is refused as any message after the end is.
    other = Stream(plane, "agent-2")
    (replayed,) = await other.send(("complete", pb.CompleteRequest(exit_code=1), token))
    await other.close()
    assert replayed.code == DENIED
    assert [w[0] for w in plane.backend.writes_for(1)].count("complete") == 1
    assert ti.outcome is not None and ti.outcome["exit_code"] == 0


async def test_a_resent_log_chunk_is_stored_once(plane: Plane) -> None:
    ti = plane.ti(1, state="running")
    token = plane.token(1)
    stream = Stream(plane)
    replies = await stream.send(
        ("log", _log(b"hello "), token),
        ("log", _log(b"hello "), token),  # resent whole
        ("log", _log(b"lo world", 3), token),  # overlapping the stored part
    )
    await stream.close()
    assert [r.code for r in replies] == [OK, OK, OK]
    assert [r.log.bytes_received for r in replies] == [6, 0, 5]
    assert bytes(ti.log) == b"hello world"
