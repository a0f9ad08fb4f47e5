"""The scheduler's side of backfills: make each point's run as room appears.

At every store poll the leader looks at the running backfills. A backfill keeps
at most its ``max_active_runs`` runs queued or running: when fewer are, it makes
the next points' runs (oldest first) through ``Scheduler.trigger``; when every
point has a run and none is live, the backfill ends (failed if any run failed).
The DAG's own ``max_active_runs`` still bounds how many of its runs run at once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from leoflow.domain.backfill import backfill_run_id
from leoflow.domain.words import plural
from leoflow.store.backfills import (
    BackfillRow,
    backfill_progress,
    finish_backfill,
    get_backfill,
    link_run,
    list_backfills,
    pending_points,
)
from leoflow.store.errors import RunExists

if TYPE_CHECKING:
    from leoflow.scheduler.core import Scheduler

log = logging.getLogger("leoflow.scheduler.backfill")

BACKFILL_RUN_TYPE = "backfill"


class BackfillDriver:
    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    async def advance(self) -> None:
        store = self._scheduler.store
        for backfill in await list_backfills(store, states=["running"], limit=1000):
            if backfill.dag_id not in self._scheduler.book.dags:
                continue  # its DAG is gone or does not load here: the backfill waits
            await self._advance_one(backfill)

    async def _advance_one(self, backfill: BackfillRow) -> None:
        scheduler = self._scheduler
        store = scheduler.store
        progress = await backfill_progress(store, backfill.pk)
        if progress.pending == 0:
            if progress.active == 0:
                state = "failed" if progress.failed else "success"
                message = f"{plural(progress.success, 'run')} succeeded, {progress.failed} failed"
                if await finish_backfill(store, backfill.pk, state, message, epoch=scheduler.epoch):
                    log.info("backfill %d of %s ended %s: %s", backfill.pk, backfill.dag_id,
                             state, message)  # fmt: skip
            return
        room = backfill.max_active_runs - progress.active
        if room <= 0:
            return
        fresh = await get_backfill(store, backfill.pk)
        if fresh is None or fresh.state != "running":
            return  # cancelled since the list was read (link_run covers the rest)
        for logical_date in await pending_points(store, backfill.pk, room):
            run_id = backfill_run_id(logical_date, backfill.pk)
            try:
                row = await scheduler.trigger(
                    backfill.dag_id,
                    logical_date=logical_date,
                    run_type=BACKFILL_RUN_TYPE,
                    run_id=run_id,
                )
            except RunExists:
                # Made by an earlier term of ours that stopped before linking it.
                found = await store.find_run(backfill.dag_id, run_id)
                if found is None:
                    continue
                row = found
            if not await link_run(store, backfill.pk, logical_date, row.pk, epoch=scheduler.epoch):
                scheduler.wake()  # cancelled meanwhile: the run was failed with it
                return
            log.info("backfill %d of %s: created run %s", backfill.pk, backfill.dag_id, run_id)
