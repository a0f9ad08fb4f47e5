"""Ships a task's stdout and stderr to the control plane as log items on the channel.

Output is kept in arrival order, tagged by stream; consecutive pieces of the same
stream are merged up to ``MAX_CHUNK``. Each chunk carries its offset in the try's
log and stays in the channel until the endpoint acknowledges it, so a broken
connection loses nothing: the channel resends what is unacknowledged and the
endpoint skips what it already stored. At most ``WINDOW`` bytes are unacknowledged
at once; when more than ``HIGH_WATER`` bytes wait behind them, the child's pipes are
paused, so a fast writer is slowed to the network's pace rather than buffered
without bound. If a chunk is refused (or cannot be delivered within the connect
timeout), the rest of the output is read and dropped so the child never blocks on
a full pipe.

The task's secret values are masked here, before a byte is queued (``masking``), so
they never reach the control plane's log store.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from collections.abc import Callable, Iterable
from typing import Any

from leoflow.agent.channel import Channel
from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.masking import Masker, Secrets
from leoflow.protocol.agent_v1 import pb

MAX_CHUNK = 256 * 1024
WINDOW = 2 * 1024 * 1024
HIGH_WATER = 4 * 1024 * 1024
LOW_WATER = 1024 * 1024


class LogShipper:
    def __init__(
        self,
        channel: Channel,
        token: Callable[[], str],
        label: str,
        secrets: Secrets | Iterable[str] = (),
    ) -> None:
        known = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        # One per stream: a value split across chunks is split within one stream.
        self._maskers = {s: Masker(known) for s in (pb.LogChunk.STDOUT, pb.LogChunk.STDERR)}
        self._channel = channel
        self._token = token
        self._label = label
        self._pending: collections.deque[tuple[int, bytes]] = collections.deque()
        self._pending_bytes = 0
        self._wake = asyncio.Event()
        self._closed = False
        self._failed = False
        self._unacked: collections.deque[tuple[asyncio.Future[Any], int]] = collections.deque()
        self._unacked_bytes = 0
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
        while self._unacked:
            await self._settle_oldest()

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
        if self._failed:
            return
        chunk = pb.LogChunk(stream=stream, data=data, offset=self.sent)
        self._unacked.append((self._channel.submit("log", chunk, self._token()), len(data)))
        self._unacked_bytes += len(data)
        self.sent += len(data)
        while self._unacked and (self._unacked_bytes > WINDOW or self._unacked[0][0].done()):
            await self._settle_oldest()

    async def _settle_oldest(self) -> None:
        future, size = self._unacked.popleft()
        self._unacked_bytes -= size
        try:
            await future
        except (Refused, Unreachable) as exc:
            if not self._failed:
                self._failed = True
                self._pending.clear()
                self._pending_bytes = 0
                self._set_paused(False)
                _warn(f"{self._label}: output refused ({exc}); the rest of it is dropped")
        else:
            self.acked += size


def _warn(message: str) -> None:
    print(f"leoflow agent: {message}", file=sys.stderr, flush=True)
