"""Who waits for a run to end (``Scheduler.wait_run``), and their answer once it has."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from leoflow.store import Store
from leoflow.store.rows import RunRow


class RunWaiters:
    def __init__(self, store: Store, spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self.store = store
        self._spawn = spawn
        self._waiting: dict[int, list[asyncio.Future[RunRow]]] = {}

    def wait(self, run_pk: int) -> asyncio.Future[RunRow]:
        future: asyncio.Future[RunRow] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(run_pk, []).append(future)
        return future

    def forget(self, run_pk: int, future: asyncio.Future[RunRow]) -> None:
        """``future`` waits no more (its caller had its answer elsewhere)."""
        waiting = self._waiting.get(run_pk, [])
        if future in waiting:
            waiting.remove(future)
        if not waiting:
            self._waiting.pop(run_pk, None)

    def run_ended(self, run_pk: int) -> None:
        """The run is terminal in the store: its waiters get the committed row."""
        waiters = self._waiting.pop(run_pk, [])
        if waiters:
            self._spawn(self._deliver(run_pk, waiters))

    async def _deliver(self, run_pk: int, waiters: list[asyncio.Future[RunRow]]) -> None:
        row = await self.store.get_run(run_pk)
        for future in waiters:
            if not future.done():
                if row is None:
                    future.set_exception(KeyError(run_pk))
                else:
                    future.set_result(row)
