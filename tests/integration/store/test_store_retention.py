"""Retention (`leoflow db prune`): what goes, what stays, in bounded batches."""

from __future__ import annotations

import time

from leoflow.domain.states import RunState
from leoflow.store import Store
from leoflow.store.retention import prune
from tests.integration.store.helpers import issue_ticket, make_run

DAY = 86400.0


async def _finished(store: Store, dag_id: str, run_id: str, ended_at: float, tasks: int = 3) -> int:
    row = await make_run(store, dag_id=dag_id, run_id=run_id, tasks=tasks)
    assert await store.transition_run(row.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    assert await store.transition_run(
        row.pk, RunState.RUNNING, RunState.SUCCESS, epoch=None, ended_at=ended_at
    )
    return row.pk


async def _owned(store: Store, run_pk: int, now: float) -> None:
    """A log chunk and an unexpired ticket for each of the run's task instances."""
    for ti in await store.list_task_instances(run_pk=run_pk):
        await store.append_log(ti.pk, 1, b"line\n")
        await issue_ticket(store, f"h-{ti.pk}", ti.pk, 1, now + DAY)


async def _sizes(store: Store) -> tuple[int, int, int]:
    runs = await store.list_runs(limit=10_000)
    tis = [t for r in runs for t in await store.list_task_instances(run_pk=r.pk)]
    logs = sum([await store.log_size(t.pk, 1) > 0 for t in tis])
    return len(runs), len(tis), logs


async def test_prune_deletes_old_finished_runs_with_what_they_own(store: Store) -> None:
    now = time.time()
    old = [await _finished(store, "a", f"old{i}", now - 3 * DAY) for i in range(5)]
    recent = await _finished(store, "a", "recent", now - 60)
    for pk in [*old, recent]:
        await _owned(store, pk, now)
    live = await make_run(store, dag_id="a", run_id="live", tasks=2)
    await store.transition_run(live.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    # A run still running, however old it is, is never touched.
    await _owned(store, live.pk, now)
    queued = await make_run(store, dag_id="a", run_id="queued", tasks=1)

    dry = await prune(store, older_than=DAY, dry_run=True, batch=2, now=now)
    assert (dry.runs, dry.task_instances, dry.log_chunks, dry.tickets) == (5, 15, 15, 15)
    assert await _sizes(store) == (8, 21, 20)  # the dry run deleted nothing

    done = await prune(store, older_than=DAY, batch=2, now=now)
    assert (done.runs, done.task_instances, done.log_chunks, done.tickets) == (5, 15, 15, 15)
    assert done.largest_batch <= 2
    assert done.batches >= 3
    left = {r.run_id for r in await store.list_runs(limit=100)}
    assert left == {"recent", "live", "queued"}
    assert await _sizes(store) == (3, 6, 5)
    assert len(await store.list_task_instances(run_pk=live.pk)) == 2
    assert (await store.get_run(queued.pk)) is not None
    again = await prune(store, older_than=DAY, now=now)
    assert (again.runs, again.task_instances) == (0, 0)


async def test_prune_by_dag_and_expired_tickets(store: Store) -> None:
    now = time.time()
    await _finished(store, "a", "r1", now - 3 * DAY)
    await _finished(store, "b", "r1", now - 3 * DAY)
    run = await make_run(store, dag_id="c", run_id="live", tasks=1)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    await issue_ticket(store, "expired", ti.pk, 1, now - 10)
    await issue_ticket(store, "valid", ti.pk, 1, now + 600)

    only_b = await prune(store, older_than=DAY, dag_id="b", now=now)
    assert only_b.runs == 1
    assert only_b.expired_tickets == 0  # --dag prunes that DAG's runs, nothing else
    assert {(r.dag_id, r.run_id) for r in await store.list_runs(limit=10)} == {
        ("a", "r1"),
        ("c", "live"),
    }
    dry = await prune(store, older_than=10 * DAY, dry_run=True, now=now)
    assert (dry.runs, dry.expired_tickets) == (0, 1)
    everything = await prune(store, older_than=DAY, batch=1, now=now)
    assert (everything.runs, everything.expired_tickets) == (1, 1)
    assert (await store.consume_ticket("valid", now)).ti_pk == ti.pk


async def test_a_dry_run_counts_each_ticket_once(store: Store) -> None:
    now = time.time()
    pk = await _finished(store, "a", "old", now - 3 * DAY, tasks=2)
    for ti in await store.list_task_instances(run_pk=pk):
        await issue_ticket(store, f"x-{ti.pk}", ti.pk, 1, now - 5)  # owned and expired
    dry = await prune(store, older_than=DAY, dry_run=True, now=now)
    done = await prune(store, older_than=DAY, now=now)
    assert dry.tickets + dry.expired_tickets == done.tickets + done.expired_tickets == 2
