"""Connection floods against a server in its own process, whose descriptors are counted
from /proc: the API (uvicorn, as ``start_server`` runs it) and the probe server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port

_SERVE = """
import asyncio, json, sys
from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.api.server import start_server
from leoflow.runtime.health import serve_health
from leoflow.settings import load_settings
from leoflow.store import Store

async def ready():
    return True

async def main():
    settings = load_settings()
    store = await Store.open(settings.resolved_database_url)
    running = await start_server(create_app(store, settings, auth=Auth.disabled()), "127.0.0.1", 0)
    await serve_health(f"127.0.0.1:{sys.argv[1]}", ready, max_connections=int(sys.argv[2]))
    print(json.dumps({"api": running.port}), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@dataclass
class Served:
    pid: int
    api_port: int
    health_port: int

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


@asynccontextmanager
async def served(home: Path, health_max: int, **settings: str) -> AsyncIterator[Served]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env.update({"LEOFLOW_HOME": str(home), **settings})
    health_port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SERVE, str(health_port), str(health_max),
        env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = await proc.stdout.readline()
        assert line, "the server process did not start"
        yield Served(proc.pid, json.loads(line)["api"], health_port)
    finally:
        proc.kill()
        await proc.wait()


async def drip(port: int, count: int, source: str = "127.0.0.1") -> list[asyncio.StreamWriter]:
    """``count`` connections from ``source``, each with a head begun and never ended."""
    out = []
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Drip: 1")
        out.append(writer)
    for writer in out:
        # One may be closed already, to make room: what a flood should meet.
        with contextlib.suppress(ConnectionError):
            await writer.drain()
    return out


async def ask(port: int, head: bytes, source: str = "127.0.0.1") -> bytes:
    """Send ``head`` (and whatever follows it), read the answer to its end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        writer.write(head)
        await writer.drain()
        async with asyncio.timeout(60):
            return await reader.read()
    finally:
        writer.close()
