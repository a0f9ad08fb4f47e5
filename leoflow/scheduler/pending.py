"""The events waiting for the next tick, and the callers waiting on their commit.

An event queued with a future (``Scheduler.submit``) is answered only once the tick
that applied it has committed: with ``None``, or with what stopped the commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from leoflow.domain.execution import ExecutorEvent, TaskFinished


@dataclass
class Pending:
    event: ExecutorEvent | None
    done: asyncio.Future[None] | None


def finished_tries(pending: list[Pending]) -> list[tuple[int, int]]:
    """The (ti_pk, try_number) of the tries these events end."""
    return [
        (p.event.ti_pk, p.event.try_number) for p in pending if isinstance(p.event, TaskFinished)
    ]


class PendingEvents:
    def __init__(self) -> None:
        self._queued: list[Pending] = []
        self._ticking: list[Pending] = []  # the events the current tick is applying

    def __len__(self) -> int:
        return len(self._queued)

    def __iter__(self) -> Iterator[Pending]:
        return iter(self._queued)

    def add(self, event: ExecutorEvent) -> None:
        self._queued.append(Pending(event, None))

    def add_waited(self, event: ExecutorEvent) -> asyncio.Future[None]:
        """Queue ``event``; the future resolves once the tick that applies it commits."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.append(Pending(event, done))
        return done

    def take(self) -> list[Pending]:
        """The queued events, for this tick to apply; the queue starts afresh."""
        pending, self._queued = self._queued, []
        self._ticking = pending
        return pending

    @staticmethod
    def settle(pending: list[Pending], exc: BaseException | None = None) -> None:
        """Answer the tick's waiting callers: committed, or ``exc``."""
        for item in pending:
            if item.done is not None and not item.done.done():
                if exc is None:
                    item.done.set_result(None)
                else:
                    item.done.set_exception(exc)

    def fail_all(self, exc: BaseException) -> None:
        """Every caller still waiting, in the tick or queued, gets ``exc``."""
        self.settle([*self._ticking, *self._queued], exc)
        self._queued.clear()
