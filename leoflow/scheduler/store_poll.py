"""The store poll: what other processes wrote reaches the book, read only when
something was written.

A full poll reads DAG definitions and pools, due cron runs, running backfills,
new runs (API triggers, cleared runs) and runs that ended under us (API cancels),
then the clear requests the API recorded for running runs. It first takes the
store's change marker (``store.change_probe``); while the marker stays what it was
before the last full poll, nothing those reads follow was committed since, and a
poll does only what the clock moves: cron. New asset events are writes, so asset-triggered
runs are made by a full poll. Where the marker does not cover task
instances (PostgreSQL: ``covers_tasks`` is False) the live tries' rows are still
read every poll, for what other replicas' agent endpoints wrote (their starts,
heartbeats and ends); with no live try that read costs nothing.

A poll that failed halfway leaves the old marker, so the next one reads all
again; so does ``forget`` (told that the store changed, before its marker shows).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from leoflow.scheduler.asset_runs import AssetRuns
from leoflow.scheduler.backfills import BackfillDriver
from leoflow.scheduler.clears import ClearDesk
from leoflow.scheduler.follow import StoreFollower
from leoflow.scheduler.run_creation import RunCreation
from leoflow.store import Store


class StorePoll:
    def __init__(
        self,
        store: Store,
        follower: StoreFollower,
        creation: RunCreation,
        backfills: BackfillDriver,
        clears: ClearDesk,
        asset_runs: AssetRuns,
    ) -> None:
        self._store = store
        self._follower = follower
        self._creation = creation
        self._backfills = backfills
        self._clears = clears
        self._asset_runs = asset_runs
        self._marker: int | None = None  # store.changes before the last full poll

    def forget(self) -> None:
        """Read everything at the next poll (another writer is known to have written)."""
        self._marker = None
        self._follower.forget_fingerprint()

    async def run(self) -> None:
        async for _ in self.steps():
            pass

    async def steps(self) -> AsyncIterator[None]:
        """The poll, yielding between its steps: the scheduler's loop runs it a step
        at a time, an event that arrives meanwhile first (``poll_steps``)."""
        changes = self._store.changes
        marker = changes.marker()  # before the reads it vouches for
        if marker is not None and marker == self._marker:
            await self._creation.create_due_runs()  # nothing was written: only the clock moved
            if not changes.covers_tasks:
                yield
                await self._follower.fold_in_agent_writes()
            return
        await self._follower.sync_definitions()
        yield
        await self._creation.create_due_runs()
        yield
        await self._asset_runs.create_triggered()  # events are writes: only a full poll
        yield
        await self._backfills.advance()
        yield
        await self._follower.follow_runs()
        yield
        await self._clears.apply_pending()
        self._marker = marker
