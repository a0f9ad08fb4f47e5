"""``wait_set``: an event wait with a bound that lets every cancellation through."""

from __future__ import annotations

import asyncio

import pytest

from leoflow.aio.waits import wait_set


@pytest.mark.parametrize("bound", [None, 60.0])
async def test_a_cancel_in_the_iteration_the_event_is_set_ends_the_loop(
    bound: float | None,
) -> None:
    """The stop that hung ``leoflow run --executor kubernetes``: a loop stopped by
    ``cancel()`` is woken by its event in the same iteration (3.11's ``wait_for``
    returned then, and the loop waited again, forever)."""
    event = asyncio.Event()
    waiting = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            waiting.set()
            await wait_set(event, bound)
            event.clear()

    task = asyncio.create_task(loop())
    await waiting.wait()
    await asyncio.sleep(0)  # the loop is inside its wait now
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert task in done and task.cancelled()
    assert rounds == 1


async def test_it_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_set(event, 10) is True
    assert await wait_set(event, 0) is True  # already set: no wait at all


async def test_its_own_timeout_is_not_a_cancellation() -> None:
    """The bound expiring returns False; the task is not left cancelling."""
    assert await wait_set(asyncio.Event(), 0.001) is False
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
