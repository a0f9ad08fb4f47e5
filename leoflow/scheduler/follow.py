"""Following the store: what other processes wrote reaches the book.

DAG specs, paused flags and pools (the API and the folder loader write them),
runs other processes created (API triggers, cleared runs) or ended (API cancels:
the run is abandoned), and what other replicas' agent endpoints wrote for tries
this scheduler thinks are live.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from leoflow.domain.catalogue import DagVersion, parse_spec
from leoflow.domain.dag import DagSpec
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import LIVE, Book
from leoflow.scheduler.config import LOCAL_RUN_TYPE
from leoflow.scheduler.mirror import RunMirror
from leoflow.store import Store

log = logging.getLogger("leoflow.scheduler")

# What a row from another writer carries over into the mirror of a live try.
_FOLDED_FIELDS = (
    "started_at",
    "ended_at",
    "next_retry_at",
    "executor_ref",
    "exit_code",
    "reason",
    "message",
)


class StoreFollower:
    def __init__(
        self,
        store: Store,
        book: Book,
        *,
        epoch: int | None,
        clock: Callable[[], float],
        spec_changed: Callable[[str], None],
        cancel: Callable[[int, int, str], None],
        run_ended: Callable[[RunMirror], None],
        pools: Mapping[str, int],
        keep_dags: Callable[[Mapping[str, float | None]], None] | None = None,
        removed_dag_grace: float = 600.0,
    ) -> None:
        self.store = store
        self.book = book
        self.epoch = epoch
        self._clock = clock
        self._spec_changed = spec_changed
        self._fingerprint: tuple[Any, ...] | None = None
        self._cancel = cancel
        self._run_ended = run_ended
        # Told of a run another process ended, with the tries that ended with it
        # (the scheduler's OpenLineage events): the batch, the run, its new state, when.
        self.ended_elsewhere: Callable[[Batch, RunMirror, RunState, float], None] | None = None
        self._spec_hashes: dict[str, str] = {}
        self._configured = frozenset(pools)
        self._pools = dict(pools)
        self._keep_dags = keep_dags
        self._grace = removed_dag_grace
        self._versions: list[DagVersion] | None = None
        self._inactive_since: dict[str, float] = {}
        self._kept: dict[str, float | None] | None = None

    def forget_fingerprint(self) -> None:
        """Read every DAG's version at the next sync (told that one changed)."""
        self._fingerprint = None

    async def sync_definitions(self) -> None:
        """DAG specs, paused flags and pools as the store has them (the API writes there).

        One aggregate row says whether any DAG row changed since the last sync; only
        then are the versions read, and a spec only when its hash moved, so an idle
        poll costs the same with ten DAGs or a thousand."""
        fingerprint = await self.store.dag_fingerprint()  # before the reads it vouches for
        if fingerprint != self._fingerprint:
            await self._read_dags()
            self._fingerprint = fingerprint
        stored = {pool.name: pool.slots for pool in await self.store.list_pools()}
        for name, slots in stored.items():
            if self._pools.get(name) != slots:
                self._pools[name] = slots
                self.book.admission.set_pool(name, slots)
        # A pool deleted through the API (never one from the settings) is gone here too.
        for name in [n for n in self._pools if n not in stored and n not in self._configured]:
            del self._pools[name]
            self.book.admission.remove_pool(name)
        self.keep_anchors()

    def keep_anchors(self) -> None:
        """Tell the executor which DAGs exist, so it deletes what it holds for the
        others (their GC anchors, and with them their pods). A DAG deleted through the
        API has no row: gone at once. One whose file left the folder (inactive) is kept
        while a run of it is live and ``removed_dag_grace`` after this scheduler first
        saw it inactive. Told only when the answer changes; costs no store read."""
        if self._keep_dags is None or self._versions is None:
            return
        now = self._clock()
        running = {run.dag_id for run in self.book.runs.values()}
        keep: dict[str, float | None] = {}
        for v in self._versions:
            if v.active or v.dag_id in running:
                self._inactive_since.pop(v.dag_id, None)
                keep[v.dag_id] = None
            else:
                keep[v.dag_id] = self._inactive_since.setdefault(v.dag_id, now) + self._grace
        if keep != self._kept:
            self._kept = keep
            self._keep_dags(keep)

    async def _read_dags(self) -> None:
        versions = await self.store.list_dag_versions()
        self._versions = versions
        active = {v.dag_id: v for v in versions if v.active}
        dags = self.book.dags
        for dag_id in [d for d in dags if d not in active]:
            del dags[dag_id]
            self._spec_hashes.pop(dag_id, None)
        stale = [
            dag_id
            for dag_id, v in active.items()
            if dag_id not in dags or self._spec_hashes.get(dag_id) != v.spec_hash
        ]
        if stale:
            for dag_id, (digest, text) in (await self.store.get_dag_specs(stale)).items():
                self._take(dag_id, digest, text)
        self.book.paused = {v.dag_id for v in versions if v.paused}

    async def learn(self, dag_id: str) -> DagSpec | None:
        """One DAG read now, before the next poll (``leoflow run``, a fresh trigger)."""
        found = (await self.store.get_dag_specs([dag_id])).get(dag_id)
        if found is not None:
            self._take(dag_id, *found)
        return self.book.dags.get(dag_id)

    def _take(self, dag_id: str, digest: str, text: str) -> None:
        try:
            spec = parse_spec(text)
        except Exception:  # whatever a stored spec does, it is that DAG's problem alone
            log.exception("stored spec of DAG %s does not load; keeping the last good one", dag_id)
            return
        self._spec_hashes[dag_id] = digest
        if self.book.dags.get(dag_id) != spec:
            self.book.dags[dag_id] = spec
            self.book.admission.set_dag_limit(dag_id, spec.max_active_tasks)
            self._spec_changed(dag_id)

    async def follow_runs(self) -> None:
        """Runs created elsewhere are adopted; runs that ended elsewhere are reloaded."""
        await self.fold_in_agent_writes()
        rows = await self.store.list_runs(states=[RunState.QUEUED, RunState.RUNNING], limit=10_000)
        active = {row.pk for row in rows}
        for run_pk in [pk for pk in self.book.runs if pk not in active]:
            await self.reload_run(run_pk)
        for row in rows:
            if row.pk in self.book.runs or row.run_type == LOCAL_RUN_TYPE:
                continue
            spec = self.book.dags.get(row.dag_id)
            if spec is None:
                continue
            tis = await self.store.list_task_instances(run_pk=row.pk)
            if row.pk not in self.book.runs:  # a trigger may have adopted it meanwhile
                self.book.adopt(row, spec, tis)

    async def fold_in_agent_writes(self) -> None:
        """Apply what other replicas' agent endpoints wrote for tries we think are live.

        Those writes are already durable, so they change only the mirror: a try
        that started elsewhere is running here too, one that ended frees its slots
        and lets its downstream go.
        """
        live = self.book.live()
        if not live:
            return
        for row in await self.store.get_task_instances([ti.pk for ti in live]):
            ti = self.book.by_pk.get(row.pk)
            if ti is None or row.try_number != ti.try_number:
                continue
            if row.heartbeat_at is not None and (ti.heartbeat_at or 0.0) < row.heartbeat_at:
                ti.heartbeat_at = row.heartbeat_at
            if row.state is ti.state:
                continue
            was_running = ti.state is TaskState.RUNNING
            if row.state is TaskState.RUNNING:
                metrics.RUNNING.inc()
            elif row.state not in LIVE:
                self.book.release(ti.pk)
                if was_running:
                    metrics.RUNNING.dec()
                metrics.TASKS_FINISHED.labels(state=row.state.value).inc()
            self.book.set_state(ti, row.state)
            for name in _FOLDED_FIELDS:
                setattr(ti, name, getattr(row, name))
            self.book.runs[ti.run_pk].dirty = True
            self.book.task_changed(ti)

    async def reload_run(self, run_pk: int) -> None:
        """Read a run again after a write of ours lost a race, or it ended elsewhere."""
        row = await self.store.get_run(run_pk)
        old = self.book.runs.get(run_pk)
        if row is None or old is None:
            return
        if row.state in RUN_TERMINAL and old.state not in RUN_TERMINAL:
            batch = await self._abandon_run(old, row.message or f"the run was marked {row.state}")
            if self.ended_elsewhere is not None:
                self.ended_elsewhere(batch, old, row.state, self._clock())
        tis = await self.store.list_task_instances(run_pk=run_pk)
        for ti in old.tasks.values():
            if ti.state is TaskState.SCHEDULED:
                self.book.withdraw(ti.pk)
        mirror = self.book.adopt(row, old.spec, tis)
        for ti in mirror.tasks.values():
            if ti.state is TaskState.SCHEDULED:
                self.book.offer(ti)
        if row.state in RUN_TERMINAL:
            self.book.forget(mirror)
            self._run_ended(mirror)

    async def _abandon_run(self, run: RunMirror, why: str) -> Batch:
        """Another process ended the run (an API cancel): stop and fail what is left."""
        now = self._clock()
        batch = Batch()
        for ti in run.tasks.values():
            if ti.state in TASK_TERMINAL:
                continue
            if ti.state in LIVE:
                batch.cancels.append((ti.pk, ti.try_number, why))
                self.book.release(ti.pk)
                if ti.state is TaskState.RUNNING:
                    metrics.RUNNING.dec()
            elif ti.state is TaskState.SCHEDULED:
                self.book.withdraw(ti.pk)
            self.book.move(
                ti,
                TaskState.FAILED,
                batch,
                ended_at=now,
                reason=EndReason.CANCELLED,
                message=f"cancelled: {why}",
            )
        results = await self.store.transition_tasks(batch.changes, epoch=self.epoch)
        if not all(results):
            log.warning("some task instances of run %s changed while it was cancelled", run.run_id)
        for ti_pk, try_number, reason in batch.cancels:
            self._cancel(ti_pk, try_number, reason)
        return batch
