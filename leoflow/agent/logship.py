"""Ships a task's stdout and stderr to the control plane over one Logs client stream.

The stream opens at the first byte of output (a silent task costs no Logs call).
Output is kept in arrival order, tagged by stream; consecutive pieces of the same
stream are merged up to ``MAX_CHUNK``. When more than ``HIGH_WATER`` bytes wait,
the child's pipes are paused, so a fast writer is slowed to the network's pace
rather than buffered without bound.

If the stream breaks with UNAVAILABLE it is reopened for what follows, and the new
stream starts with a ``GAP_MARKER`` line on stderr, so a log that may have lost what
was in flight says so; if it is refused, the rest of the output is read and dropped
so the child never blocks on a full pipe.

The task's secret values are masked here, before a byte is queued (``masking``), so
they never reach the control plane's log store.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from leoflow.agent.client import Client
from leoflow.agent.masking import Masker
from leoflow.protocol.agent_v1 import pb

MAX_CHUNK = 256 * 1024
HIGH_WATER = 4 * 1024 * 1024
LOW_WATER = 1024 * 1024
_MAX_REOPENS = 5
GAP_MARKER = (
    b"[leoflow agent: the log stream was interrupted here and reopened; "
    b"output written just before this line may be missing]\n"
)


class LogShipper:
    def __init__(
        self,
        client: Client,
        token: Callable[[], str],
        label: str,
        secrets: Iterable[str] = (),
    ) -> None:
        values = tuple(secrets)
        # One per stream: a value split across chunks is split within one stream.
        self._maskers = {s: Masker(values) for s in (pb.LogChunk.STDOUT, pb.LogChunk.STDERR)}
        self._client = client
        self._token = token
        self._label = label
        self._pending: collections.deque[tuple[int, bytes]] = collections.deque()
        self._pending_bytes = 0
        self._wake = asyncio.Event()
        self._closed = False
        self._failed = False
        self._reopens = 0
        self._gap = False
        self._ends_line = True
        self._call: Any = None
        self._pause: Callable[[bool], None] | None = None
        self._paused = False
        self.sent = 0
        self.acked = 0

    def on_pressure(self, pause: Callable[[bool], None]) -> None:
        """``pause(True)`` stops reading the child's pipes, ``pause(False)`` resumes."""
        self._pause = pause

    def feed(self, stream: int, data: bytes) -> None:
        masker = self._maskers.get(stream)
        if masker is not None:
            data = masker.feed(data)
        self._queue(stream, data)

    def _queue(self, stream: int, data: bytes) -> None:
        if self._failed or not data:
            return
        self._pending.append((stream, data))
        self._pending_bytes += len(data)
        self._wake.set()
        if self._pending_bytes > HIGH_WATER and not self._paused and self._pause is not None:
            self._paused = True
            self._pause(True)

    def finish(self) -> None:
        for stream, masker in self._maskers.items():
            self._queue(stream, masker.flush())
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            if not self._pending:
                if self._closed:
                    break
                self._wake.clear()
                await self._wake.wait()
                continue
            stream, data = self._take()
            if self._paused and self._pending_bytes < LOW_WATER:
                self._set_paused(False)
            await self._send(stream, data)
        await self._close_call()

    def _take(self) -> tuple[int, bytes]:
        stream, data = self._pending.popleft()
        if len(data) > MAX_CHUNK:
            self._pending.appendleft((stream, data[MAX_CHUNK:]))
            data = data[:MAX_CHUNK]
        elif self._pending and self._pending[0][0] == stream:
            parts = [data]
            size = len(data)
            while self._pending and self._pending[0][0] == stream:
                nxt = self._pending[0][1]
                if size + len(nxt) > MAX_CHUNK:
                    break
                self._pending.popleft()
                parts.append(nxt)
                size += len(nxt)
            data = b"".join(parts)
        self._pending_bytes -= len(data)
        return stream, data

    def _set_paused(self, paused: bool) -> None:
        if self._paused != paused and self._pause is not None:
            self._paused = paused
            self._pause(paused)

    async def _send(self, stream: int, data: bytes) -> None:
        # A chunk whose write failed never left: it goes again on the reopened stream.
        while not self._failed:
            if self._call is None:
                self._call = self._client.logs(self._token())
            try:
                if self._gap:
                    marker = GAP_MARKER if self._ends_line else b"\n" + GAP_MARKER
                    await self._call.write(pb.LogChunk(stream=pb.LogChunk.STDERR, data=marker))
                    self._gap = False
                await self._call.write(pb.LogChunk(stream=stream, data=data))
                self.sent += len(data)
                self._ends_line = data.endswith(b"\n")
                return
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass
            call, self._call = self._call, None
            code, details = await _status(call)
            if code == grpc.StatusCode.UNAVAILABLE and self._reopens < _MAX_REOPENS:
                self._reopens += 1
                self._gap = True
                _warn(
                    f"{self._label}: log stream interrupted ({details}); reopening it, "
                    "output in flight may be lost (the log marks the place)"
                )
                continue
            self._failed = True
            self._pending.clear()
            self._pending_bytes = 0
            self._set_paused(False)
            _warn(
                f"{self._label}: log stream refused ({_name(code)}: {details}); "
                "the rest of the output is dropped"
            )

    async def _close_call(self) -> None:
        call, self._call = self._call, None
        if call is None:
            return
        try:
            await call.done_writing()
            ack = await call
            self.acked += ack.bytes_received
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            code, details = await _status(call)
            _warn(f"{self._label}: log stream ended with {_name(code)}: {details}")


async def _status(call: Any) -> tuple[Any, str]:
    try:
        return await call.code(), (await call.details()) or ""
    except Exception as exc:  # a call that never started has no status
        return None, str(exc)


def _name(code: Any) -> str:
    return getattr(code, "name", str(code))


def _warn(message: str) -> None:
    print(f"leoflow agent: {message}", file=sys.stderr, flush=True)
