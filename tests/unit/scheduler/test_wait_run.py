"""``wait_run`` of a run that is not in the scheduler's book reads the store; a run that
ends during that read still answers the waiter."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from leoflow.domain.states import RunState
from leoflow.scheduler.core import Scheduler


class _Executor:
    name = "stub"
    uses_agent = False
    agents_dial_here = False


class _StoreEndingTheRunDuringTheRead:
    """The first read sees the run running, and the run ends while it is on its way."""

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None
        self.reads = 0

    async def get_run(self, run_pk: int) -> Any:
        self.reads += 1
        if self.reads == 1:
            assert self.scheduler is not None
            self.scheduler._waiters.run_ended(run_pk)  # committed, book resolved it
            await asyncio.sleep(0)
            return SimpleNamespace(pk=run_pk, state=RunState.RUNNING)
        return SimpleNamespace(pk=run_pk, state=RunState.SUCCESS)


async def test_a_run_ending_while_wait_run_reads_the_store_still_answers() -> None:
    store = _StoreEndingTheRunDuringTheRead()
    scheduler = Scheduler(store, _Executor())  # type: ignore[arg-type]
    store.scheduler = scheduler
    row = await asyncio.wait_for(scheduler.wait_run(7), 5)
    assert row.state is RunState.SUCCESS and store.reads == 2


async def test_a_terminal_run_in_the_store_leaves_no_waiter_behind() -> None:
    store = _StoreEndingTheRunDuringTheRead()
    store.reads = 1  # every read sees it ended
    scheduler = Scheduler(store, _Executor())  # type: ignore[arg-type]
    row = await scheduler.wait_run(7)
    assert row.state is RunState.SUCCESS
    assert scheduler._waiters._waiting == {}
