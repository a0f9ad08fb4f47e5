"""The store poll, a step at a time, so a finished task never waits for a whole poll.

A full poll of the store is several reads (DAG versions and pools, due cron runs,
backfills, runs and live tries other writers changed, clear requests). On a loaded
PostgreSQL that is 100-300 ms, and an agent's Complete that arrives meanwhile used to
wait for all of it before its tick could launch the downstream task
(``benchmarks/bench_pro_scale.py``: the upstream-finished to downstream-created lag).

Here the poll is an async generator (``StorePoll.steps``) that yields between its
steps. The loop runs one step per tick at the start of the tick, while the book
equals what is committed (the last tick's flush is done), then more steps only while
no event waits; the rest wait for the next tick. So an event waits for at most one
step, and a poll under a steady stream of events still finishes: one step per tick.

A poll the scheduler was told to make (``Scheduler.wake``: another writer in this
process changed the store, a clear request say) runs whole before the events, as
every poll did before: a clear recorded before a completion arrives wins the tick.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable


class SteppedPoll:
    """The poll in progress, if any: its remaining steps."""

    def __init__(self) -> None:
        self._steps: AsyncIterator[None] | None = None
        self._whole = False  # this poll runs to its end before any event
        self._urged = False  # the next poll (and the rest of this one) runs whole

    @property
    def pending(self) -> bool:
        """A poll has begun and has steps left."""
        return self._steps is not None

    def urge(self) -> None:
        self._urged = True

    def begin(self, steps: AsyncIterator[None]) -> None:
        self._steps = steps
        self._whole, self._urged = self._urged, False

    async def step(self) -> None:
        """Run the next step (the last one ends the poll)."""
        if self._steps is None:
            return
        try:
            await anext(self._steps)
        except StopAsyncIteration:
            self._steps = None
        except BaseException:
            self._steps = None  # a failed poll is begun afresh, not resumed
            raise

    async def run(self, busy: Callable[[], bool]) -> None:
        """One step, then more while ``busy()`` says nothing waits."""
        await self.step()
        while self._steps is not None and (self._whole or self._urged or not busy()):
            await self.step()
