"""Who waits for a run to end (``Scheduler.wait_run``), and their answer once it has."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container, Coroutine
from typing import Any

from leoflow.domain.states import RUN_TERMINAL
from leoflow.store import Store
from leoflow.store.rows import RunRow


class RunWaiters:
    def __init__(
        self,
        store: Store,
        booked: Container[int],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store = store
        self._booked = booked  # the runs the book holds: their end comes by run_ended()
        self._spawn = spawn
        self._waiting: dict[int, list[asyncio.Future[RunRow]]] = {}

    async def until_ended(
        self, run_pk: int, loop: Callable[[], asyncio.Task[None] | None]
    ) -> RunRow:
        """The run's row once it is terminal; what stopped the loop, if it stops first."""
        # Waiting before the store is read: a run that ends during the read still
        # answers this waiter (registered after the read, it waited for ever).
        future = self.wait(run_pk)
        if run_pk not in self._booked:
            try:
                row = await self.store.get_run(run_pk)
            except BaseException:
                self.forget(run_pk, future)
                raise
            if row is None or row.state in RUN_TERMINAL:
                self.forget(run_pk, future)
                if row is None:
                    raise KeyError(f"no run {run_pk}")
                return row
        loop_task = loop()  # after the read: the loop may have started meanwhile
        if loop_task is None:
            return await future
        waiting: set[asyncio.Future[Any]] = {future, loop_task}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            return future.result()
        if loop_task.cancelled():
            raise RuntimeError("the scheduler loop was cancelled")
        loop_task.result()  # re-raises what stopped the loop
        raise RuntimeError("the scheduler loop stopped")

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
