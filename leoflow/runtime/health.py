"""A tiny HTTP server for probes and Prometheus: ``/healthz``, ``/readyz``, ``/metrics``.

The scheduler has no web framework; a probe endpoint is a few lines of asyncio,
and it keeps FastAPI's import out of the scheduler process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

Check = Callable[[], Awaitable[bool]]

# Seconds a client has to send its request line and headers (each line is at most
# the stream's 64 KiB limit).
HEAD_TIMEOUT = 5.0
# Connections open at once. A newcomer past it takes the place of the oldest one still
# sending its head (a stalled client), so a flood of them cannot keep kubelet's probe
# out; when none is, the newcomer is closed at once.
MAX_CONNECTIONS = 64


async def _respond(writer: asyncio.StreamWriter, status: str, body: bytes, ctype: str) -> None:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()


async def serve_health(
    listen: str, ready: Check, *, max_connections: int = MAX_CONNECTIONS
) -> Callable[[], Awaitable[None]]:
    """Serve on ``host:port``; ``ready`` decides /readyz. Returns an async closer."""
    host, _, port = listen.rpartition(":")
    # Open connections, oldest first; True while the head is still awaited.
    open_: dict[asyncio.StreamWriter, bool] = {}

    def admit(writer: asyncio.StreamWriter) -> bool:
        if len(open_) < max_connections:
            return True
        stalled = next((w for w, waiting in open_.items() if waiting), None)
        if stalled is None:
            return False
        del open_[stalled]
        stalled.transport.abort()
        return True

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not admit(writer):
            writer.transport.abort()
            return
        open_[writer] = True
        try:
            await answer(reader, writer)
        finally:
            open_.pop(writer, None)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # One bound for the whole head: a client that drips header lines, each
            # in time, must not hold the connection open for ever.
            async with asyncio.timeout(HEAD_TIMEOUT):
                request = await reader.readline()
                while await reader.readline() not in (b"\r\n", b"\n", b""):
                    pass
        except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            writer.close()
            return
        if writer.transport.is_closing():  # gave way to a newer connection
            return
        open_[writer] = False
        parts = request.decode("latin-1").split()
        path = parts[1].split("?")[0] if len(parts) > 1 else ""
        if path == "/metrics":
            await _respond(writer, "200 OK", generate_latest(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            await _respond(writer, "200 OK", b"ok\n", "text/plain")
        elif path == "/readyz":
            ok = await ready()
            status = "200 OK" if ok else "503 Service Unavailable"
            await _respond(writer, status, b"ok\n" if ok else b"not ready\n", "text/plain")
        else:
            await _respond(writer, "404 Not Found", b"not found\n", "text/plain")

    server = await asyncio.start_server(handle, host.strip("[]") or "0.0.0.0", int(port))

    async def close() -> None:
        server.close()
        await server.wait_closed()

    return close
