"""A pool agent whose Lite died abandons its channel: what waits for a reply fails at
once, and so does whatever is sent after, instead of dialing the dead endpoint until
the connect timeout."""

from __future__ import annotations

import asyncio
import socket

import pytest

from leoflow.agent.channel import Channel
from leoflow.agent.client import Unreachable
from leoflow.protocol.agent_v1 import pb


def _refusing_address() -> str:
    # A port bound and never listened on: every connection to it is refused.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    return address


async def test_abandon_fails_what_waits_and_what_comes_after_at_once() -> None:
    channel = Channel(_refusing_address(), connect_timeout=600)
    try:
        waiting = channel.submit("heartbeat", pb.HeartbeatRequest(), "token")
        await asyncio.sleep(0.3)  # the runner is dialing, backing off between tries
        assert not waiting.done()
        opened = channel.streams_opened
        channel.abandon("the Lite process that started this agent (pid 7) is gone")
        with pytest.raises(Unreachable, match="pid 7"):
            await asyncio.wait_for(waiting, 5)
        later = channel.submit("heartbeat", pb.HeartbeatRequest(), "token")
        assert later.done()
        with pytest.raises(Unreachable, match="is gone"):
            await later
        await asyncio.sleep(0.5)  # long enough for another try, were one to come
        assert channel.streams_opened == opened
    finally:
        await channel.close()
