"""Garbage collection of finished task pods: each deleted once, ``pod_gc_age`` after it ended.

Scheduled when the cache sees a pod turn terminal (event-driven, no periodic list); a
delete the apiserver does not answer is tried again later, still once at most.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Awaitable, Callable

from leoflow.aio.waits import wait_set
from leoflow.kube.records import PodRecord, parse_time

# GC tries a pod again every GC_RETRY seconds until the apiserver answers.
GC_RETRY = 30.0

# Deletes the named pod if it is still the one with that uid: True deleted, False
# gone or another pod by now, None no answer.
Delete = Callable[[str, str], Awaitable[bool | None]]


class PodGc:
    def __init__(self, gc_age: float, clock: Callable[[], float]) -> None:
        self.gc_age = gc_age
        self._clock = clock
        self._heap: list[tuple[float, str, str]] = []  # (due, uid, name)
        self._scheduled: set[str] = set()  # uids: each pod deleted by GC once
        self._wakeup = asyncio.Event()
        # The latest pods GC deleted, by name (bounded: tests read it).
        self.deleted: deque[str] = deque(maxlen=10_000)

    def schedule(self, record: PodRecord) -> None:
        if record.uid in self._scheduled:
            return
        self._scheduled.add(record.uid)
        now = self._clock()
        finished = parse_time(record.finished_at)
        base = min(finished, now) if finished is not None else now
        heapq.heappush(self._heap, (base + self.gc_age, record.uid, record.name))
        self._wakeup.set()

    def claim(self, uid: str) -> None:
        """Someone else deletes this pod: GC must not delete it a second time."""
        self._scheduled.add(uid)

    def forget(self, uid: str) -> None:
        """The pod is gone from the cache."""
        self._scheduled.discard(uid)

    async def run(self, current: Callable[[str], PodRecord | None], delete: Delete) -> None:
        while True:
            self._wakeup.clear()
            now = self._clock()
            due: list[tuple[str, str]] = []
            while self._heap and self._heap[0][0] <= now:
                _, uid, name = heapq.heappop(self._heap)
                due.append((uid, name))
            for uid, name in due:
                record = current(name)
                if record is None or record.uid != uid or record.deleting:
                    continue  # gone already, or someone is deleting it
                done = await delete(name, uid)
                if done:
                    self.deleted.append(name)
                elif done is None:  # no answer: try again later, still once at most
                    retry = self._clock() + min(GC_RETRY, max(self.gc_age, 1.0))
                    heapq.heappush(self._heap, (retry, uid, name))
            wait = self._heap[0][0] - self._clock() if self._heap else None
            await wait_set(self._wakeup, wait)
