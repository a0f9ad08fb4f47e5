"""Store calls that arrive together go as one transaction (a group commit).

Thirty-two agents' tries each appending their output, or asking where their log
ends, were a transaction apiece: per task, a store round trip that one per batch
does as well. A call here waits for the transaction in flight, if any, and then
goes with every call that arrived meanwhile; a lone call still costs one
transaction and waits no longer than before. Calls keep their arrival order in
their batch, and batches run one after another, so two appends to one log land
in the order they were made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")

# Calls per transaction: far under any database's parameter limit.
MAX_BATCH = 500


class Coalescer(Generic[A, R]):
    def __init__(self, many: Callable[[Sequence[A]], Awaitable[Sequence[R]]]) -> None:
        """``many``: the calls' arguments in, their results in the same order out."""
        self._many = many
        self._pending: list[tuple[A, asyncio.Future[R]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def call(self, arg: A) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((arg, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                results = await self._many([arg for arg, _ in batch])
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
