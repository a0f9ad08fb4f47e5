"""The task's command as the event loop sees it: its pipes feed the log shipper, and
are drained after its exit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from leoflow.agent.logship import LogShipper
from leoflow.protocol.agent_v1 import pb

# After the command exits, how long its pipes may stay open (held by a process it
# left behind) before the rest of its process group is killed.
_PIPE_LINGER = 1.0
_PIPE_DRAIN_CAP = 10.0


class ChildProtocol(asyncio.SubprocessProtocol):
    def __init__(self, shipper: LogShipper) -> None:
        loop = asyncio.get_running_loop()
        self.shipper = shipper
        self.exited: asyncio.Future[int] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        self.shipper.feed(pb.LogChunk.STDOUT if fd == 1 else pb.LogChunk.STDERR, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if self.transport is not None and not self.exited.done():
            code = self.transport.get_returncode()
            self.exited.set_result(code if code is not None else -1)

    def pause(self, paused: bool) -> None:
        if self.transport is None:
            return
        for fd in (1, 2):
            pipe = self.transport.get_pipe_transport(fd)
            if pipe is not None and not pipe.is_closing():
                if paused:
                    pipe.pause_reading()  # type: ignore[attr-defined]
                else:
                    pipe.resume_reading()  # type: ignore[attr-defined]


async def drain_pipes(proto: ChildProtocol, pid: int | None) -> None:
    """Wait for EOF on stdout and stderr; kill what the command left holding them."""
    if proto.pipes_closed.done():  # the usual case: EOF came with the exit
        return
    done, _ = await asyncio.wait([proto.pipes_closed], timeout=_PIPE_LINGER)
    if done or pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    await asyncio.wait([proto.pipes_closed], timeout=_PIPE_DRAIN_CAP)
