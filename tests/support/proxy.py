"""A TCP proxy a test can cut: a real network partition between one client and a server."""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, target_host: str, target_port: int, *, unix: str | None = None) -> None:
        self.target = (target_host, target_port)
        self.unix = unix  # a Unix socket to reach instead of the target (a local PostgreSQL)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.unix is not None:
                up_reader, up_writer = await asyncio.open_unix_connection(self.unix)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    async def retarget(self, host: str, port: int) -> None:
        """Send new connections elsewhere and reset the old ones (a Service whose
        endpoints changed)."""
        self.target = (host, port)
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()
        self._writers.clear()

    def freeze(self) -> None:
        """Pass no more bytes either way but keep every connection open: a silent
        partition, where no reset reaches either side (``thaw`` lets them flow)."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    async def restore(self) -> None:
        await self.start()

    async def stop(self) -> None:
        await self.cut()
