"""Retention beside the scheduling loop: old finished runs go, a small batch at a time.

With ``retention`` set (``LEOFLOW_RETENTION``, a duration), the scheduler starts
one ``Retention`` task next to its loop. Every ``interval`` it prunes the runs
that finished more than ``retention`` ago (``Store.prune``: each batch its own
short transaction; a run still out, and each DAG's latest scheduled run, stay).
Between batches it rests ``pause`` seconds, so the loop's group commits get the
database; the loop itself never waits for a prune. A prune that fails is logged
and tried again next interval: retention must never stop the scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from leoflow.scheduler.instruments import counter
from leoflow.store import Store
from leoflow.store.retention import PruneCounts

log = logging.getLogger("leoflow.scheduler.retention")

# How often the scheduler looks for runs past retention, how many runs one
# transaction deletes, and how long it rests between two of them.
INTERVAL = 300.0
BATCH = 100
PAUSE = 0.05

PRUNED = counter(
    "leoflow_retention_pruned_rows_total", "Rows deleted by retention, by kind", ["kind"]
)


class Retention:
    """Prunes finished runs older than ``older_than`` every ``interval`` (None: never)."""

    def __init__(
        self,
        store: Store,
        older_than: float | None,
        *,
        interval: float = INTERVAL,
        batch: int = BATCH,
        pause: float = PAUSE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.older_than = older_than
        self.interval = interval
        self.batch = batch
        self.pause = pause
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.passes = 0
        self.total = PruneCounts()

    def start(self) -> None:
        if self.older_than is not None and self._task is None:
            self._task = asyncio.create_task(self._run(), name="leoflow-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def prune_once(self) -> PruneCounts:
        """One pass: everything past retention now, batch by batch."""
        assert self.older_than is not None
        counts = await self.store.prune(
            older_than=self.older_than,
            batch=self.batch,
            now=self._clock(),
            between=self._rest,
        )
        self.passes += 1
        self.total.add(counts)
        for kind in ("runs", "task_instances", "log_chunks", "tickets", "expired_tickets"):
            PRUNED.labels(kind=kind).inc(getattr(counts, kind))
        if counts.rows:
            log.info("retention: deleted %s", counts.summary())
        return counts

    async def _rest(self) -> None:
        await asyncio.sleep(self.pause)

    async def _run(self) -> None:
        while True:
            try:
                await self.prune_once()
            except Exception as exc:
                log.warning(
                    "retention: the prune failed, trying again in %gs: %s", self.interval, exc
                )
            await asyncio.sleep(self.interval)
