"""The group commit: one tick's batch written in one fenced transaction.

Every event waiting on the tick is durable when this returns. A compare-and-set
that lost a race means the book is stale for that run: the run is read again and
its launches are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.scheduler.local_tickets import LocalTickets
from leoflow.scheduler.logbuffer import LogEntry
from leoflow.store import RunChange, Store

log = logging.getLogger("leoflow.scheduler")


class GroupCommit:
    def __init__(
        self,
        store: Store,
        book: Book,
        *,
        epoch: int | None,
        ticket_ttl: float,
        clock: Callable[[], float],
        reload_run: Callable[[int], Awaitable[None]],
        local_tickets: LocalTickets | None = None,
    ) -> None:
        """``local_tickets``: where the launches' tickets go instead of the store."""
        self.store = store
        self.local_tickets = local_tickets
        self.book = book
        self.epoch = epoch
        self.ticket_ttl = ticket_ttl
        self._clock = clock
        self._reload_run = reload_run

    async def flush(self, batch: Batch, logs: Sequence[LogEntry] = ()) -> None:
        """``logs``: output to append in the same transaction (see ``LogBuffer``)."""
        runs = [
            RunChange(run.pk, expected, new, fields)
            for run, expected, new, fields in batch.run_changes
        ]
        stored_tickets = batch.tickets if self.local_tickets is None else []
        if (
            batch.changes or stored_tickets or runs or logs or batch.notes
        ):  # asset events ride on changes
            # The runs' changes ride in the tasks' transaction: a run's start and end
            # were a transaction each, two of a small run's handful.
            results, run_results = await self.store.commit_batch(
                batch.changes,
                runs,
                epoch=self.epoch,
                tickets=stored_tickets,
                tickets_expire_at=self._clock() + self.ticket_ttl,
                logs=logs,
                notes=batch.notes,
                asset_events=batch.asset_events,
            )
            stale = {
                change.ti_pk for change, ok in zip(batch.changes, results, strict=True) if not ok
            }
            if stale:
                await self._reconcile(stale, batch)
            for (run, expected, new, _), ok in zip(batch.run_changes, run_results, strict=True):
                if not ok:
                    log.warning(
                        "run %s changed under us (%s -> %s lost); reloading",
                        run.run_id,
                        expected,
                        new,
                    )
                    await self._reload_run(run.pk)
        if self.local_tickets is not None and batch.tickets:
            # Only the launches that survived the commit: a lost race dropped the rest.
            launched = {launch.ti_pk for launch in batch.launches}
            now = self._clock()
            for ticket_hash, ti_pk, try_number in batch.tickets:
                if ti_pk in launched:
                    self.local_tickets.add(
                        ticket_hash, ti_pk, try_number, expires_at=now + self.ticket_ttl, now=now
                    )
        for run in batch.finished_runs:
            self.book.forget(run)

    async def _reconcile(self, stale: set[int], batch: Batch) -> None:
        """Some CAS writes lost a race: reload those runs and drop their launches."""
        by_pk = self.book.by_pk
        runs = {by_pk[pk].run_pk for pk in stale if pk in by_pk}
        log.warning(
            "%d task instance write(s) lost a race; reloading %d run(s)", len(stale), len(runs)
        )
        batch.launches = [launch for launch in batch.launches if launch.ti_pk not in stale]
        for run_pk in runs:
            await self._reload_run(run_pk)
