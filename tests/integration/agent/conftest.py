from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from leoflow.scheduler.agent_endpoint import AgentEndpoint
from leoflow.secrets import DirectorySecrets

from .fake_backend import FakeBackend
from .plane import KEY, Plane


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[Plane]:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    backend = FakeBackend(DirectorySecrets(secrets_dir))
    endpoint = AgentEndpoint(backend, KEY, heartbeat_interval=0.2, max_message_bytes=1024 * 1024)
    address = await endpoint.start("127.0.0.1:0")
    channel = grpc.aio.insecure_channel(address)
    try:
        yield Plane(backend, endpoint, address, channel, secrets_dir)
    finally:
        await channel.close()
        await endpoint.stop(0)
