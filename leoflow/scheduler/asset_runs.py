"""Asset-triggered runs: a DAG scheduled on assets gets a run once its condition is met
by events newer than what its last asset-triggered run consumed.

Read at each full store poll (an event, a DAG or a pause changed something). Per DAG
and poll at most one run, consuming every new event of every asset its schedule names,
however many arrived (a flood coalesces); the store decides, in the run's own
transaction (leoflow/store/assets.py), so a restart or a second replica never
consumes an event twice. A paused DAG is not looked at: its events wait, and the
first poll after it is unpaused makes one run of them all.
"""

from __future__ import annotations

import logging

from leoflow.domain.assets.condition import is_met
from leoflow.domain.dag import DagSpec
from leoflow.scheduler.book import Book
from leoflow.scheduler.run_creation import RunCreation, task_seeds
from leoflow.store import Store
from leoflow.store.assets import LostTrigger, TriggerState

log = logging.getLogger("leoflow.scheduler")


class AssetRuns:
    def __init__(self, store: Store, book: Book, creation: RunCreation, epoch: int | None) -> None:
        self._store = store
        self._book = book
        self._creation = creation
        self._epoch = epoch
        self._faults = creation.faults

    async def create_triggered(self) -> None:
        specs = {
            dag_id: spec
            for dag_id, spec in self._book.dags.items()
            if spec.asset_schedule is not None and dag_id not in self._book.paused
        }
        if not specs:
            return
        states = await self._store.asset_trigger_states(specs)
        uris = {uri for spec in specs.values() for uri in spec.schedule_assets()}
        newest = await self._store.newest_asset_event_pks(uris)
        for dag_id, spec in specs.items():
            state = states.get(dag_id)
            if state is None:  # stored before it had an asset schedule: not yet armed
                continue
            fresh = {
                uri: newest[uri]
                for uri in spec.schedule_assets()
                if newest.get(uri, 0) > state.cursor(uri)
            }
            assert spec.asset_schedule is not None
            if not fresh or not is_met(spec.asset_schedule, fresh):
                continue

            async def work(
                dag_id: str = dag_id,
                spec: DagSpec = spec,
                state: TriggerState = state,
                fresh: dict[str, int] = fresh,
            ) -> None:
                await self._create(dag_id, spec, state, fresh)

            await self._faults.guard(dag_id, "create its asset-triggered run", work)

    async def _create(
        self, dag_id: str, spec: DagSpec, state: TriggerState, fresh: dict[str, int]
    ) -> None:
        try:
            row, tis = await self._store.create_asset_run(
                dag_id,
                state=state,
                consumed=fresh,
                tasks=task_seeds(spec, None),
                epoch=self._epoch,
            )
        except LostTrigger:
            log.info("the asset events of %s were consumed by another scheduler", dag_id)
            return
        log.info(
            "created asset-triggered run %s of %s (assets: %s)",
            row.run_id,
            dag_id,
            ", ".join(sorted(fresh)),
        )
        self._creation.adopt(row, spec, tis)
