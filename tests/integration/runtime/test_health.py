"""The scheduler's probe server (``/healthz``, ``/readyz``, ``/metrics``) over a real socket."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from leoflow.runtime import health
from tests.support.net import free_port


async def _ready() -> bool:
    return True


async def _ask(port: int, head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_it_answers_probes_and_refuses_other_paths() -> None:
    port = free_port()
    close = await health.serve_health(f"127.0.0.1:{port}", _ready)
    try:
        ok = await _ask(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK") and ok.endswith(b"\r\n\r\nok\n")
        missing = await _ask(port, b"GET /nope HTTP/1.1\r\n\r\n")
        assert missing.startswith(b"HTTP/1.1 404")
    finally:
        await close()


async def test_a_client_dripping_header_lines_is_cut_off_at_the_heads_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every header line comes in time, the head never ends: the server closes the
    connection, unanswered, once the head's one bound passes. Bounded per line, it
    read on for as long as the client kept dripping."""
    monkeypatch.setattr(health, "HEAD_TIMEOUT", 0.3)
    port = free_port()
    close = await health.serve_health(f"127.0.0.1:{port}", _ready)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def drip() -> None:
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(1200):  # a line every 0.05 s for a minute
                writer.write(b"X-Drip: 1\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)

    dripping = asyncio.create_task(drip())
    try:
        try:
            answer = await asyncio.wait_for(reader.read(), 30)
        except ConnectionResetError:  # closed with our unread lines in its buffer: a reset
            answer = b""
        assert answer == b""  # closed, and nothing was answered
        assert not dripping.done()  # cut off while the client still had lines to send
    finally:
        dripping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dripping
        writer.close()
        await close()
