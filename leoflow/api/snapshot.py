"""Read what *why is it waiting* needs from the store, as the plain data
``leoflow.domain.explain`` takes."""

from __future__ import annotations

from leoflow.api.lookup import spec_of
from leoflow.domain.explain import AdmissionSnapshot, Limits, RunGate, RunInfo, TaskInfo
from leoflow.domain.explain import count_running_and_older as _count
from leoflow.domain.states import TASK_HOLDS_SLOTS, RunState, TaskState
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.rows import TaskInstanceRow

# Far above any real number of active runs; the lists below are of active rows only.
_ACTIVE_LIMIT = 1_000_000


def task_info(ti: TaskInstanceRow) -> TaskInfo:
    return TaskInfo(
        key=ti.pk,
        run_key=ti.run_pk,
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        state=ti.state,
        try_number=ti.try_number,
        max_tries=ti.max_tries,
        pool=ti.pool,
        pool_slots=ti.pool_slots,
        priority=ti.priority,
        ready_at=ti.ready_at,
        next_retry_at=ti.next_retry_at,
        reason=ti.reason,
        message=ti.message,
    )


async def pool_sizes(store: Store, settings: Settings) -> dict[str, int]:
    """Pools as the scheduler sizes them: the settings', overridden by the store's."""
    return {**settings.pools, **{p.name: p.slots for p in await store.list_pools()}}


async def _limits(store: Store, settings: Settings) -> Limits:
    caps = {}
    for dag in await store.list_dags():
        spec = spec_of(dag)
        if spec is not None:
            caps[dag.dag_id] = spec.max_active_tasks
    return Limits(
        parallelism=settings.parallelism,
        default_pool_slots=settings.default_pool_slots,
        pools=await pool_sizes(store, settings),
        dag_max_active_tasks=caps,
    )


async def _snapshot(
    store: Store, settings: Settings, waiting: list[TaskInstanceRow], ages: dict[int, float]
) -> AdmissionSnapshot:
    held = await store.list_task_instances(states=TASK_HOLDS_SLOTS)
    missing = {ti.run_pk for ti in (*held, *waiting)} - ages.keys()
    # Only the runs of these task instances: their ages order admission.
    ages = {**ages, **await store.run_created_at(missing)}
    return AdmissionSnapshot(
        limits=await _limits(store, settings),
        held=[task_info(ti) for ti in held],
        waiting=[task_info(ti) for ti in waiting],
        run_created_at=ages,
    )


async def admission_snapshot(
    store: Store, settings: Settings, *, target: TaskInstanceRow | None = None
) -> AdmissionSnapshot:
    """Every slot holder and every scheduled task instance, with the limits.

    ``target`` is added to the waiting ones if the reads missed it (it changed
    between them), so the answer is always about it.
    """
    waiting = await store.list_task_instances(states=[TaskState.SCHEDULED])
    if target is not None and target.pk not in {ti.pk for ti in waiting}:
        waiting.append(target)
    return await _snapshot(store, settings, waiting, {})


async def first_waiting_snapshot(
    store: Store, settings: Settings, limit: int
) -> tuple[AdmissionSnapshot, list[TaskInstanceRow]]:
    """Every slot holder and the first ``limit`` scheduled task instances in admission
    order (what holds each back is decided by those before it only), with the limits."""
    waiting, ages = await store.scheduled_in_admission_order(limit)
    return await _snapshot(store, settings, waiting, ages), waiting


async def run_gate(store: Store, run: RunInfo, max_active_runs: int) -> RunGate:
    rows = await store.list_runs(
        dag_id=run.dag_id, states=[RunState.QUEUED, RunState.RUNNING], limit=_ACTIVE_LIMIT
    )
    infos = [RunInfo(r.pk, r.dag_id, r.run_id, r.state, r.created_at) for r in rows]
    running, older = _count(infos, run)
    return RunGate(max_active_runs=max_active_runs, running=running, older_queued=older)
