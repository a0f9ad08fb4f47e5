"""Waiting on a condition, not on the clock: poll it with a generous timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    """Return once ``check()`` is true; fail naming ``what`` after ``timeout`` seconds."""
    for _ in range(int(timeout * 20)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
