"""An Exchange on the Channel that asks to start gets the command in its own reply, one
round trip less per task; an endpoint that does not start (it refused, or it is of the
previous release) leaves ``start`` out and the agent sends Start itself."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from leoflow.protocol.agent_v1 import pb
from leoflow.scheduler.agent_channel import ChannelHandler

from .plane import Plane
from .test_channel_attacks import OK, Stream

PY = sys.executable


def _start(**fields: Any) -> Any:
    return pb.StartRequest(hostname="h", pid=1, **fields)


async def test_an_exchange_asking_to_start_answers_the_command(plane: Plane) -> None:
    ti = plane.ti(1, argv=["echo", "hi"], env={"A": "1"})
    stream = Stream(plane, "agent-1")
    (reply,) = await stream.send(
        ("exchange", pb.ExchangeRequest(ticket=plane.backend.ticket(ti), start=_start()), "")
    )
    await stream.close()
    assert reply.code == OK, reply.details
    assert reply.exchange.session_token and reply.exchange.HasField("start")
    assert list(reply.exchange.start.argv) == ["echo", "hi"]
    assert dict(reply.exchange.start.env)["A"] == "1"
    assert ti.state == "running"
    assert [w[0] for w in plane.backend.writes_for(1)] == ["consume_ticket", "start"]


async def test_an_exchange_alone_starts_nothing(plane: Plane) -> None:
    ti = plane.ti(1, argv=["true"])
    stream = Stream(plane, "agent-1")
    (reply,) = await stream.send(
        ("exchange", pb.ExchangeRequest(ticket=plane.backend.ticket(ti)), "")
    )
    await stream.close()
    assert reply.code == OK and not reply.exchange.HasField("start")
    assert ti.state == "queued" and plane.backend.starts == 0


async def test_a_start_refused_within_the_exchange_still_opens_the_session(plane: Plane) -> None:
    ti = plane.ti(1, argv=["true"])
    stream = Stream(plane, "agent-1")
    (reply,) = await stream.send(
        (
            "exchange",
            pb.ExchangeRequest(ticket=plane.backend.ticket(ti), start=_start(pod_name="p" * 5000)),
            "",
        )
    )
    # The Start the agent then sends itself gets the refusal, with its own status.
    (start,) = await stream.send(
        ("start", _start(pod_name="p" * 5000), reply.exchange.session_token)
    )
    await stream.close()
    assert reply.code == OK and reply.exchange.session_token
    assert not reply.exchange.HasField("start")
    assert start.code != OK and "too long" in start.details
    assert ti.state == "queued" and [w[0] for w in plane.backend.writes_for(1)] == [
        "consume_ticket"
    ]


async def _agent_runs(plane: Plane) -> list[str]:
    """Run a real agent on one task; the kinds of item the endpoint was sent."""
    kinds: list[str] = []
    dispatch = ChannelHandler._dispatch

    async def recording(self: ChannelHandler, item: Any, stream: Any) -> None:
        kinds.append(str(item.WhichOneof("body")))
        await dispatch(self, item, stream)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChannelHandler, "_dispatch", recording)
        ti = plane.ti(1, argv=[PY, "-c", "print('ran')"])
        proc = await plane.agent(env=plane.agent_env(LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti)))
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert b"ran\n" in bytes(ti.log) and ti.state == "success"
    assert plane.backend.starts == 1
    return kinds


@pytest.mark.slow
async def test_the_agent_starts_within_its_exchange(plane: Plane) -> None:
    kinds = await _agent_runs(plane)
    assert kinds[0] == "exchange" and "start" not in kinds and kinds[-1] == "complete"


@pytest.mark.slow
async def test_the_agent_sends_start_to_an_endpoint_that_did_not(plane: Plane) -> None:
    async def previous_release(self: ChannelHandler, request: Any, peer: str) -> Any:
        return await self._ops.exchange(request, peer)  # ignores the start it was asked

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChannelHandler, "_exchange", previous_release)
        kinds = await _agent_runs(plane)
    assert kinds[:2] == ["exchange", "start"] and kinds[-1] == "complete"
