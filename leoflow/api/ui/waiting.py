"""What the waiting and pools pages show.

The waiting page answers "why is it waiting?" for the whole system from bounded
reads: counts by state in one GROUP BY, the first ``CLASSIFIED`` scheduled task
instances in admission order (classified exactly: admission is greedy in that
order, so the ones after cannot change what holds these back), and at most
``WAITING_SHOWN`` rows of every other group, whose sizes come from the counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leoflow.api import pools as pools_api
from leoflow.api.auth import Principal
from leoflow.api.context import ApiContext
from leoflow.api.lookup import spec_of
from leoflow.api.snapshot import first_waiting_snapshot
from leoflow.domain.durations import format_duration
from leoflow.domain.explain import admission_for
from leoflow.domain.states import RunState, TaskState
from leoflow.store.rows import RunRow, TaskInstanceRow

WAITING_SHOWN = 50
# Scheduled task instances classified per view; the rest are counted.
CLASSIFIED = 2000


@dataclass
class WaitGroup:
    key: str
    title: str
    detail: str
    items: list[tuple[TaskInstanceRow, str]] = field(default_factory=list)
    runs: list[RunRow] = field(default_factory=list)
    # The group's size when only its first rows were read.
    total: int | None = None

    @property
    def count(self) -> int:
        return self.total if self.total is not None else len(self.items) + len(self.runs)


_GROUP_TITLES = {
    "pool_missing": "pool {pool} does not exist",
    "pool_too_small": "pool {pool} is too small",
    "pool_slots": "pool {pool} is full",
    "dag_max_active_tasks": "DAG {dag}: max_active_tasks",
    "parallelism": "parallelism",
    "ready": "ready: starts at the next admission round",
}


class _Groups(dict[str, WaitGroup]):
    def get_or_add(self, key: str, title: str, detail: str = "") -> WaitGroup:
        if key not in self:
            self[key] = WaitGroup(key, title, detail)
        return self[key]


async def _scheduled(ctx: ApiContext, groups: _Groups, scheduled_total: int) -> None:
    snapshot, scheduled = await first_waiting_snapshot(ctx.store, ctx.settings, CLASSIFIED)
    admission = admission_for(snapshot)
    for ti in scheduled:
        if admission.is_held(ti.pk):
            groups.get_or_add("next_tick", "admitted on the scheduler's next tick").items.append(
                (ti, "")
            )
            continue
        why = admission.why(ti.pk)
        if why is None:
            continue
        title = _GROUP_TITLES.get(why.reason, why.reason).format(pool=ti.pool, dag=ti.dag_id)
        key = f"{why.reason}:{ti.pool if why.reason.startswith('pool') else ti.dag_id}"
        if why.reason == "parallelism":
            key = "parallelism"
        detail = why.message.split(";")[0] if why.reason != "ready" else ""
        groups.get_or_add(key, title, detail).items.append((ti, why.message))
    rest = scheduled_total - len(scheduled)
    if rest > 0:
        g = groups.get_or_add(
            "unclassified",
            f"scheduled, behind the first {CLASSIFIED} in admission order",
            "not classified here: open one to see what holds it back",
        )
        g.total = rest


async def waiting_view(ctx: ApiContext) -> dict[str, Any]:
    store = ctx.store
    now = ctx.clock()
    counts = await store.count_task_instances(
        [TaskState.SCHEDULED, TaskState.QUEUED, TaskState.UP_FOR_RETRY]
    )
    groups = _Groups()
    await _scheduled(ctx, groups, counts[TaskState.SCHEDULED.value])
    queued = await store.list_task_instances(states=[TaskState.QUEUED], limit=WAITING_SHOWN)
    if queued:
        g = groups.get_or_add("launching", "admitted, waiting for the executor to start it")
        g.items = [(ti, f"holds {ti.pool_slots} slot(s) of pool {ti.pool}") for ti in queued]
        g.total = counts[TaskState.QUEUED.value]
    retrying = await store.list_task_instances(states=[TaskState.UP_FOR_RETRY], limit=WAITING_SHOWN)
    if retrying:
        g = groups.get_or_add("retry", "waiting for a retry delay")
        for ti in retrying:
            due = ti.next_retry_at
            text = f"try {ti.try_number + 1} of {ti.max_tries}" + (
                f" in {format_duration(due - now)}" if due and due > now else " is due"
            )
            g.items.append((ti, text))
        g.total = counts[TaskState.UP_FOR_RETRY.value]
    await _queued_runs(ctx, groups)
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.key))
    return {
        "groups": ordered,
        "shown": WAITING_SHOWN,
        "total": sum(g.count for g in ordered),
    }


async def _queued_runs(ctx: ApiContext, groups: _Groups) -> None:
    store = ctx.store
    runs = await store.count_runs_by_dag([RunState.QUEUED, RunState.RUNNING])
    queued = {d: n for (d, s), n in runs.items() if s == RunState.QUEUED.value and n}
    if not queued:
        return
    first = await store.runs_per_dag(
        queued, WAITING_SHOWN, states=[RunState.QUEUED], oldest_first=True
    )
    dags = {row.dag_id: row for row in await store.list_dags()}
    for dag_id in sorted(queued):
        row = dags.get(dag_id)
        spec = spec_of(row) if row is not None else None
        cap = spec.max_active_runs if spec else 1
        g = groups.get_or_add(
            f"runs:{dag_id}",
            f"DAG {dag_id}: max_active_runs",
            f"{runs[(dag_id, RunState.RUNNING.value)]} of {cap} max_active_runs running",
        )
        g.runs = first.get(dag_id, [])
        g.total = queued[dag_id]


async def pools_view(ctx: ApiContext, who: Principal) -> dict[str, Any]:
    listed = await pools_api.list_pools(ctx, who)
    return {"pools": listed.pools}
