from __future__ import annotations

import asyncio

import pytest

from leoflow.domain.states import IllegalTransition, TaskState
from leoflow.store import Store, TaskChange

from .helpers import make_run

T = TaskState


async def test_transition_task_cas_with_fields(store: Store) -> None:
    run = await make_run(store, tasks=2)
    ti, other = await store.list_task_instances(run_pk=run.pk)
    assert await store.transition_task(ti.pk, T.NONE, T.SCHEDULED, epoch=None, ready_at=1.0)
    assert await store.transition_task(
        ti.pk, T.SCHEDULED, T.QUEUED, epoch=None, try_number=1, queued_at=2.0
    )
    # Wrong try: refused, visible.
    assert not await store.transition_task(ti.pk, T.QUEUED, T.RUNNING, epoch=None, expected_try=2)
    assert await store.transition_task(
        ti.pk, T.QUEUED, T.RUNNING, epoch=None, expected_try=1, started_at=3.0,
        executor_ref="pid:42",
    )  # fmt: skip
    # Lost race: not in the expected state any more.
    assert not await store.transition_task(ti.pk, T.QUEUED, T.RUNNING, epoch=None)
    assert await store.transition_task(
        ti.pk, T.RUNNING, T.FAILED, epoch=None, ended_at=4.0, exit_code=137, reason="oom",
        message="out of memory", next_retry_at=None, heartbeat_at=3.5, max_tries=5,
    )  # fmt: skip
    got = await store.get_task_instance(ti.pk)
    assert got is not None
    assert got.state is T.FAILED and got.try_number == 1 and got.max_tries == 5
    assert (got.ready_at, got.queued_at, got.started_at, got.ended_at) == (1.0, 2.0, 3.0, 4.0)
    assert (got.exit_code, got.reason, got.message) == (137, "oom", "out of memory")
    assert (got.executor_ref, got.heartbeat_at) == ("pid:42", 3.5)
    untouched = await store.get_task_instance(other.pk)
    assert untouched == other
    assert not await store.transition_task(ti.pk + 999, T.NONE, T.SCHEDULED, epoch=None)


async def test_illegal_task_transition_refused_nothing_written(store: Store) -> None:
    run = await make_run(store, tasks=2)
    a, b = await store.list_task_instances(run_pk=run.pk)
    with pytest.raises(IllegalTransition):
        await store.transition_task(a.pk, T.NONE, T.RUNNING, epoch=None, started_at=1.0)
    with pytest.raises(TypeError):
        await store.transition_task(a.pk, T.NONE, T.SCHEDULED, epoch=None, state="running")
    with pytest.raises(IllegalTransition):
        await store.transition_tasks(
            [TaskChange(a.pk, T.NONE, T.SCHEDULED), TaskChange(b.pk, T.NONE, T.RUNNING)],
            epoch=None,
        )
    assert await store.list_task_instances(run_pk=run.pk) == [a, b]


async def test_concurrent_cas_exactly_one_wins(store_url: str, store: Store) -> None:
    # Two stores = two connection pools, as two processes would have.
    rival = await Store.open(store_url)
    try:
        run = await make_run(store, tasks=20)
        tis = await store.list_task_instances(run_pk=run.pk)
        for round_ in range(20):
            ti = tis[round_]
            first, second = await asyncio.gather(
                store.transition_task(ti.pk, T.NONE, T.SCHEDULED, epoch=None, ready_at=1.0),
                rival.transition_task(ti.pk, T.NONE, T.FAILED, epoch=None, reason="cancelled"),
            )
            assert first != second, f"round {round_}: both or neither won"
            got = await store.get_task_instance(ti.pk)
            assert got is not None
            assert got.state is (T.SCHEDULED if first else T.FAILED)
            assert (got.reason is None) == first
    finally:
        await rival.close()


async def test_concurrent_batches_exactly_one_wins_per_row(store_url: str, store: Store) -> None:
    rival = await Store.open(store_url)
    try:
        run = await make_run(store, tasks=100)
        pks = [ti.pk for ti in await store.list_task_instances(run_pk=run.pk)]
        mine, theirs = await asyncio.gather(
            store.transition_tasks([TaskChange(pk, T.NONE, T.SCHEDULED) for pk in pks], epoch=None),
            rival.transition_tasks(
                [TaskChange(pk, T.NONE, T.SKIPPED) for pk in reversed(pks)], epoch=None
            ),
        )
        theirs = theirs[::-1]
        assert all(a != b for a, b in zip(mine, theirs, strict=True))
        states = {ti.pk: ti.state for ti in await store.list_task_instances(run_pk=run.pk)}
        for pk, won in zip(pks, mine, strict=True):
            assert states[pk] is (T.SCHEDULED if won else T.SKIPPED)
    finally:
        await rival.close()


async def test_transition_tasks_batch(store: Store) -> None:
    run = await make_run(store, tasks=6)
    tis = await store.list_task_instances(run_pk=run.pk)
    pk = [ti.pk for ti in tis]
    await store.transition_task(pk[5], T.NONE, T.SKIPPED, epoch=None)
    results = await store.transition_tasks(
        [
            TaskChange(pk[0], T.NONE, T.SCHEDULED, fields={"ready_at": 5.0}),
            # The same row again, after the change above: applies in order.
            TaskChange(pk[0], T.SCHEDULED, T.QUEUED, fields={"try_number": 1, "queued_at": 6.0}),
            TaskChange(pk[0], T.QUEUED, T.RUNNING, expected_try=1, fields={"started_at": 7.0}),
            TaskChange(pk[1], T.NONE, T.SCHEDULED),
            TaskChange(pk[2], T.SCHEDULED, T.QUEUED),  # lost: pk[2] is none
            TaskChange(pk[3], T.NONE, T.UPSTREAM_FAILED, fields={"reason": "upstream_failed"}),
            TaskChange(pk[4], T.NONE, T.SCHEDULED, expected_try=3),  # wrong try
            TaskChange(pk[5], T.NONE, T.SCHEDULED),  # lost: skipped
            TaskChange(pk[5] + 1000, T.NONE, T.SCHEDULED),  # no such row
        ],
        epoch=None,
    )
    assert results == [True, True, True, True, False, True, False, False, False]
    got = {ti.pk: ti for ti in await store.list_task_instances(run_pk=run.pk)}
    assert got[pk[0]].state is T.RUNNING and got[pk[0]].try_number == 1
    assert (got[pk[0]].ready_at, got[pk[0]].queued_at, got[pk[0]].started_at) == (5.0, 6.0, 7.0)
    assert [got[p].state for p in pk[1:]] == [
        T.SCHEDULED, T.NONE, T.UPSTREAM_FAILED, T.NONE, T.SKIPPED,
    ]  # fmt: skip
    assert got[pk[3]].reason == "upstream_failed"
    assert await store.transition_tasks([], epoch=None) == []


async def test_transition_tasks_large_batch(store: Store) -> None:
    run = await make_run(store, tasks=1200)
    tis = await store.list_task_instances(run_pk=run.pk)
    results = await store.transition_tasks(
        [TaskChange(ti.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0}) for ti in tis],
        epoch=None,
    )
    assert results == [True] * 1200
    scheduled = await store.list_task_instances(states=[T.SCHEDULED], dag_id="dag")
    assert len(scheduled) == 1200 and all(ti.ready_at == 1.0 for ti in scheduled)


async def test_list_task_instances_filters_and_cursor(store: Store) -> None:
    run_a = await make_run(store, dag_id="a", tasks=7)
    run_b = await make_run(store, dag_id="b", tasks=5)
    all_tis = await store.list_task_instances()
    assert [ti.pk for ti in all_tis] == sorted(ti.pk for ti in all_tis)
    assert len(all_tis) == 12
    b_pks = [ti.pk for ti in all_tis if ti.run_pk == run_b.pk]
    for pk in b_pks[:2]:
        await store.transition_task(pk, T.NONE, T.SCHEDULED, epoch=None)
    sched = await store.list_task_instances(states=[T.SCHEDULED])
    assert [ti.pk for ti in sched] == b_pks[:2]
    assert await store.list_task_instances(dag_id="a", states=[T.SCHEDULED]) == []
    assert len(await store.list_task_instances(dag_id="a")) == 7
    assert len(await store.list_task_instances(run_pk=run_a.pk, states={T.NONE})) == 7

    seen: list[int] = []
    after = None
    while page := await store.list_task_instances(limit=5, after_pk=after):
        seen.extend(ti.pk for ti in page)
        after = page[-1].pk
    assert seen == [ti.pk for ti in all_tis]


async def test_heartbeat_only_running_and_matching_try(store: Store) -> None:
    run = await make_run(store, tasks=1)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    assert not await store.heartbeat(ti.pk, 0, 1.0)
    await store.transition_tasks(
        [
            TaskChange(ti.pk, T.NONE, T.SCHEDULED),
            TaskChange(ti.pk, T.SCHEDULED, T.QUEUED, fields={"try_number": 1}),
            TaskChange(ti.pk, T.QUEUED, T.RUNNING),
        ],
        epoch=None,
    )
    assert not await store.heartbeat(ti.pk, 2, 5.0)
    assert await store.heartbeat(ti.pk, 1, 6.0)
    got = await store.get_task_instance(ti.pk)
    assert got is not None and got.heartbeat_at == 6.0


async def test_get_task_instances_by_pks(store: Store) -> None:
    run = await make_run(store, tasks=3)
    _, b, c = await store.list_task_instances(run_pk=run.pk)
    assert await store.transition_task(b.pk, T.NONE, T.SCHEDULED, epoch=None, ready_at=1.0)
    got = await store.get_task_instances([c.pk, b.pk, 999_999])
    assert [t.pk for t in got] == [b.pk, c.pk]  # ordered; unknown pks are left out
    assert got[0].state is T.SCHEDULED and got[1].state is T.NONE
    assert await store.get_task_instances([]) == []
