"""The token bucket pod creates and deletes share: a burst of creates waits here, never
a Lease call."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; ``take`` waits for one.

    A take that finds no token reserves the next one (the count goes below zero) and
    sleeps until it is due, so the takers are spaced on the bucket's own clock. Each
    waiter used to hold a lock through its sleep and restart the clock from when it
    woke: on a busy loop every sleep overshoots, and each overshoot was lost to the
    rate (``benchmarks/bench_pro_scale.py``: 165-185 creates/s from a 200/s bucket).
    A reservation that is cancelled gives its token back.
    """

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()

    async def take(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= 1.0
        if self._tokens >= 0.0:
            return
        try:
            await asyncio.sleep(-self._tokens / self.rate)
        except asyncio.CancelledError:
            self._tokens += 1.0
            raise
