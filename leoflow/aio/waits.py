"""Bounded waits that never swallow a cancellation.

Python 3.11's ``asyncio.wait_for`` returns the awaited result, dropping the
cancellation, when its task is cancelled in the loop iteration in which the awaited
thing finishes (CPython gh-86296; 3.12 rebuilt ``wait_for`` on ``asyncio.timeout``).
A loop stopped by ``cancel()`` and woken by the same event then waits on — forever
when its wait has no bound: ``leoflow run --executor kubernetes`` hung at exit that
way, its pod GC woken by the run's last pod as it was being stopped.

So ``asyncio.wait_for`` is banned in ``leoflow/`` (ruff TID251) and waits go through
``asyncio.timeout``, which counts cancellations and lets a cancel through; this
module holds the one shape that recurs, waiting for an event with a bound.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, within: float | None) -> bool:
    """Wait until ``event`` is set or ``within`` seconds pass (None: no bound).

    True if the event is set. A cancellation always propagates, even one that comes
    in the same iteration as the event.
    """
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(within):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
