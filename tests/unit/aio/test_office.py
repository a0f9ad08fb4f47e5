"""The hold-office loop both leader electors share: work runs only while the lease is held."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from leoflow.aio.office import LeaseLoop


class Timings:
    identity = "me"
    retry_period = 0.01
    renew_deadline = 0.05


class ScriptedLease(LeaseLoop):
    """A lease whose attempts answer from a script (True: held)."""

    def __init__(self, answers: list[bool | Exception]) -> None:
        super().__init__("the test lease")
        self.config = Timings()
        self.answers = answers
        self.attempts: list[bool] = []
        self.released = 0

    async def try_acquire_or_renew(self) -> bool:
        answer = self.answers.pop(0) if self.answers else False
        if isinstance(answer, Exception):
            raise answer
        return answer

    def count_attempt(self, held: bool) -> None:
        self.attempts.append(held)

    async def acquire(self) -> None:
        while not await self._attempt():  # noqa: ASYNC110 - polling is how a lease is won
            await asyncio.sleep(self.config.retry_period)

    async def release(self) -> None:
        self.released += 1


async def test_work_is_cancelled_when_renewals_stop() -> None:
    lease = ScriptedLease([True, True, False])  # won, renewed once, then never again
    changes: list[bool] = []
    cancelled = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    runner = asyncio.create_task(lead_for(lease, lead, changes))
    await asyncio.wait_for(cancelled.wait(), 30)
    await asyncio.wait_for(until(lambda: changes == [True, False]), 30)
    runner.cancel()
    assert lease.attempts[:3] == [True, True, False]
    assert lease.released == 0  # a lost lease is not ours to release
    assert not lease.is_leader


async def test_work_that_fails_gives_the_lease_up() -> None:
    lease = ScriptedLease([RuntimeError("apiserver down"), True])
    failed = asyncio.Event()

    async def lead() -> None:
        failed.set()
        raise ValueError("broken leader")

    runner = asyncio.create_task(lead_for(lease, lead, []))
    await asyncio.wait_for(failed.wait(), 30)
    await asyncio.wait_for(until(lambda: lease.released == 1), 30)
    runner.cancel()
    assert lease.attempts[0] is False  # the error counted as not held, and was retried


async def lead_for(
    lease: ScriptedLease, lead: Callable[[], Coroutine[Any, Any, None]], changes: list[bool]
) -> None:
    await lease.run(lead, on_change=changes.append)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 - the loop under test exposes no event
        await asyncio.sleep(0.005)
