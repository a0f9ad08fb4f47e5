"""A local HTTP server that records webhook calls, over real sockets.

Each POST's JSON body is recorded; ``answer`` decides the status of each request
(by the body and how many times that body came before), and ``hold`` keeps every
answer back until it is set, to show that nothing waits for the webhook.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any


class WebhookServer:
    def __init__(self, answer: Callable[[dict[str, Any], int], int] = lambda body, seen: 200):
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's, lower-cased names
        self.answered: list[tuple[dict[str, Any], int]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def __aenter__(self) -> WebhookServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.hold.set()

    def delivered(self) -> list[dict[str, Any]]:
        return [body for body, status in self.answered if status < 300]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", 0))
                body = json.loads(await reader.readexactly(length)) if length else {}
                seen = sum(1 for r in self.requests if r == body)
                self.requests.append(body)
                self.headers.append(headers)
                self._changed.set()
                await self.hold.wait()
                status = self.answer(body, seen)
                self.answered.append((body, status))
                self._changed.set()
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-length: 2\r\ncontent-type: "
                    "application/json\r\n\r\n{}".encode()
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()
