"""The agent endpoint bounds its connections: a flood of silent TCP connections costs
at most ``max_connections`` descriptors, each for at most the handshake timeout; an
HTTP/2 connection without a call is closed after the idle timeout; a call's stream is
not, however quiet."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from leoflow.protocol.agent_v1 import method_path, pb
from leoflow.scheduler.agent_bounds import ConnectionBounds
from leoflow.scheduler.agent_endpoint import AgentEndpoint
from leoflow.secrets import DirectorySecrets
from leoflow.settings import load_settings
from tests.support.net import closed_by_peer
from tests.support.waiting import until

from .fake_backend import FakeBackend
from .plane import KEY

BOUNDS = ConnectionBounds(max_connections=20, handshake_timeout=0.5, idle_timeout=0.5)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[tuple[AgentEndpoint, str, FakeBackend]]:
    backend = FakeBackend(DirectorySecrets(tmp_path))
    served = AgentEndpoint(backend, KEY, heartbeat_interval=0.2, bounds=BOUNDS)
    address = await served.start("127.0.0.1:0")
    try:
        yield served, address, backend
    finally:
        await served.stop(0)


async def test_silent_connections_are_bounded_then_closed_and_their_descriptors_freed(
    endpoint: tuple[AgentEndpoint, str, FakeBackend],
) -> None:
    _, address, _ = endpoint
    host, _, port = address.rpartition(":")
    baseline = _open_fds()
    flood = []
    for _ in range(60):
        sock = socket.create_connection((host, int(port)))
        sock.setblocking(False)
        flood.append(sock)
    try:
        # The server holds at most max_connections of the 60 (ours are the other 60).
        assert _open_fds() - baseline - len(flood) <= BOUNDS.max_connections + 2

        async def all_closed() -> bool:
            return all(closed_by_peer(sock) for sock in flood)

        # Not one byte sent: each is closed at the handshake timeout, or at once past the bound.
        await until(all_closed, "the endpoint to close every silent connection")
    finally:
        for sock in flood:
            sock.close()

    async def back_to_baseline() -> bool:
        return _open_fds() <= baseline

    await until(back_to_baseline, "the endpoint's descriptors to return to the baseline")


async def _closed_as_idle(address: str, options: list[tuple[str, int]]) -> None:
    """A channel made ready, then left without a call, is closed by the endpoint."""
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        async with asyncio.timeout(30):
            await channel.channel_ready()

        async def gone_idle() -> bool:
            # The server's GOAWAY moves the client's channel from READY to IDLE.
            return bool(channel.get_state() == grpc.ChannelConnectivity.IDLE)

        await until(gone_idle, "a call-less connection to be closed as idle")


async def test_a_connection_without_a_call_is_closed_after_the_idle_timeout(
    endpoint: tuple[AgentEndpoint, str, FakeBackend],
) -> None:
    await _closed_as_idle(endpoint[1], [])


async def test_a_quiet_stream_outlives_the_idle_timeout(
    endpoint: tuple[AgentEndpoint, str, FakeBackend],
) -> None:
    _, address, _ = endpoint
    async with grpc.aio.insecure_channel(address) as channel:
        stream = channel.stream_stream(
            method_path("Channel"),
            request_serializer=pb.AgentBatch.SerializeToString,
            response_deserializer=pb.ReplyBatch.FromString,
        )()
        async with asyncio.timeout(30):
            await channel.channel_ready()
        # The open call keeps the connection busy: wait until a fresh connection without
        # a call, opened after this one, has been closed as idle — then this one is older.
        # Its own subchannel pool: a second channel would otherwise share the connection.
        await _closed_as_idle(address, [("grpc.use_local_subchannel_pool", 1)])
        assert channel.get_state() == grpc.ChannelConnectivity.READY
        refused = pb.AgentBatch(items=[pb.AgentItem(id=1, heartbeat=pb.HeartbeatRequest())])
        await stream.write(refused)
        async with asyncio.timeout(30):
            reply = await stream.read()
        # The item is refused (no token), but on the same, still open stream.
        assert [r.id for r in reply.replies] == [1]
        await stream.done_writing()


def test_the_bounds_come_from_the_settings() -> None:
    settings = load_settings(
        agent_max_connections=7, agent_handshake_timeout=1.5, agent_idle_timeout=9
    )
    bounds = ConnectionBounds.from_settings(settings)
    options = dict(bounds.server_options())
    assert options["grpc.max_allowed_incoming_connections"] == 7
    assert options["grpc.server_handshake_timeout_ms"] == 1500
    assert options["grpc.max_connection_idle_ms"] == 9000
