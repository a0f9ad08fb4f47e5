"""Buffers task output on its way to the store.

Output arrives in many small pieces; writing each as its own row would make a
chatty task cost a transaction per line. Pieces are joined per try and written
every ``interval`` or once ``max_bytes`` collect, and flushed before the try's
outcome is committed so a finished task's log is complete when its state says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from leoflow.aio.waits import wait_set
from leoflow.store import Store, StoreError

log = logging.getLogger("leoflow.scheduler.logs")

T = TypeVar("T")
LogEntry = tuple[int, int, bytes]

# How long a cancelled flush waits for the write it started (see flush).
CANCEL_WAIT = 1.0


class LogBuffer:
    def __init__(self, store: Store, interval: float = 0.2, max_bytes: int = 256 * 1024) -> None:
        self._store = store
        self._interval = interval
        self._max_bytes = max_bytes
        self._pending: dict[tuple[int, int], list[bytes]] = {}
        self._sizes: dict[tuple[int, int], int] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="leoflow-log-buffer")

    def add(self, ti_pk: int, try_number: int, data: bytes) -> None:
        key = (ti_pk, try_number)
        self._pending.setdefault(key, []).append(data)
        self._sizes[key] = self._sizes.get(key, 0) + len(data)
        if self._sizes[key] >= self._max_bytes:
            self._kick.set()

    async def flush(self, keys: list[tuple[int, int]] | None = None) -> None:
        """Write what is buffered (of ``keys``, or all) in one transaction."""
        await self.write_with(keys, self._store.append_logs)

    async def write_with(
        self, keys: list[tuple[int, int]] | None, write: Callable[[list[LogEntry]], Awaitable[T]]
    ) -> T:
        """Give ``write`` the output buffered for ``keys`` (None: all) and drop it once
        written: the tick writes its finished tries' output in its own commit, so a
        batch of completions costs that one transaction, not one more per try."""
        async with self._lock:
            taken = []
            for key in list(self._pending) if keys is None else keys:
                chunks = self._pending.get(key)
                if chunks:
                    taken.append((key, len(chunks), b"".join(chunks)))
            entries = [(key[0], key[1], data) for key, _, data in taken]
            # Taken out only once written: a write that fails leaves the output here
            # for the next flush, so none is lost.
            done = asyncio.ensure_future(write(entries))
            try:
                result = await asyncio.shield(done)
            except asyncio.CancelledError:
                # Stopping: a write in the database's hands may still commit. Give it a
                # moment, so the final flush does not write its output twice.
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    async with asyncio.timeout(CANCEL_WAIT):
                        await done
                if done.done() and not done.cancelled() and done.exception() is None:
                    for key, count, data in taken:
                        self._taken(key, count, len(data))
                raise
            for key, count, data in taken:
                self._taken(key, count, len(data))
            return result

    def _taken(self, key: tuple[int, int], count: int, size: int) -> None:
        chunks = self._pending.get(key, [])
        del chunks[:count]
        self._sizes[key] = self._sizes.get(key, 0) - size
        if not chunks:
            self._pending.pop(key, None)
            self._sizes.pop(key, None)

    async def _run(self) -> None:
        while True:
            await wait_set(self._kick, self._interval)
            self._kick.clear()
            try:
                await self.flush()
            except StoreError as exc:  # the store said why (a full disk at stop): no traceback
                log.error("writing task output to the store failed; will retry: %s", exc)
            except Exception:
                log.exception("writing task output to the store failed; will retry")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            await self.flush()
        except StoreError as exc:  # a full disk while stopping: say so, do not hang
            log.error("task output still buffered at stop was not written: %s", exc)
