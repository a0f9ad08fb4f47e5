"""A tick's commit: the tasks' and the runs' compare-and-sets in one fenced
transaction (``commit_batch``), and a run created with its task instances read back
in its own transaction (``create_run_with_tasks``)."""

from __future__ import annotations

import pytest

from leoflow.domain.states import RunState
from leoflow.domain.states import TaskState as T
from leoflow.store import RunChange, StaleEpoch, Store, TaskChange
from leoflow.store.errors import RunExists

from .helpers import make_run, seeds


async def test_runs_change_with_the_tasks_each_its_own_compare_and_set(store: Store) -> None:
    run = await make_run(store, tasks=2)
    other = await make_run(store, run_id="other", tasks=1)
    tis = await store.list_task_instances(run_pk=run.pk)
    tasks, runs = await store.commit_batch(
        [TaskChange(ti.pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0}) for ti in tis],
        [
            RunChange(run.pk, RunState.QUEUED, RunState.RUNNING, {"started_at": 2.0}),
            RunChange(other.pk, RunState.RUNNING, RunState.SUCCESS),  # it is queued: lost
            RunChange(run.pk, RunState.RUNNING, RunState.SUCCESS, {"ended_at": 3.0}),
        ],
        epoch=None,
    )
    assert tasks == [True, True]
    assert runs == [True, False, True]
    row = await store.get_run(run.pk)
    assert row is not None
    assert (row.state, row.started_at, row.ended_at) == (RunState.SUCCESS, 2.0, 3.0)
    untouched = await store.get_run(other.pk)
    assert untouched is not None and untouched.state is RunState.QUEUED
    assert {ti.state for ti in await store.list_task_instances(run_pk=run.pk)} == {T.SCHEDULED}


async def test_an_illegal_run_change_refuses_the_whole_batch(store: Store) -> None:
    run = await make_run(store, tasks=1)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    with pytest.raises(ValueError):
        await store.commit_batch(
            [TaskChange(ti.pk, T.NONE, T.SCHEDULED)],
            [RunChange(run.pk, RunState.SUCCESS, RunState.QUEUED)],
            epoch=None,
        )
    assert (await store.list_task_instances(run_pk=run.pk))[0].state is T.NONE


async def test_a_batch_of_runs_alone_is_fenced(store: Store) -> None:
    old = await store.take_office("scheduler-a")
    run = await make_run(store, tasks=1, epoch=old)
    new = await store.take_office("scheduler-b")
    with pytest.raises(StaleEpoch):
        await store.commit_batch(
            [], [RunChange(run.pk, RunState.QUEUED, RunState.RUNNING)], epoch=old
        )
    row = await store.get_run(run.pk)
    assert row is not None and row.state is RunState.QUEUED
    assert await store.commit_batch(
        [], [RunChange(run.pk, RunState.QUEUED, RunState.RUNNING)], epoch=new
    ) == ([], [True])


async def test_a_run_comes_back_with_its_task_instances(store: Store) -> None:
    row, tis = await store.create_run_with_tasks(
        "dag", "r1", run_type="manual", logical_date=None, conf={}, tasks=seeds(5), epoch=None
    )
    assert tis == await store.list_task_instances(run_pk=row.pk)
    assert [ti.task_id for ti in tis] == [s.task_id for s in seeds(5)]
    assert (await store.get_run(row.pk)) == row
    empty, none = await store.create_run_with_tasks(
        "dag", "r2", run_type="manual", logical_date=None, conf={}, tasks=[], epoch=None
    )
    assert none == []
    with pytest.raises(RunExists):
        await store.create_run_with_tasks(
            "dag", "r1", run_type="manual", logical_date=None, conf={}, tasks=seeds(1), epoch=None
        )
    assert empty.pk != row.pk


async def test_the_ends_output_and_queued_notes_ride_in_the_batch(store: Store) -> None:
    run = await make_run(store, tasks=2)
    first, second = await store.list_task_instances(run_pk=run.pk)
    await store.commit_batch(
        [
            change
            for ti in (first, second)
            for change in (
                TaskChange(ti.pk, T.NONE, T.SCHEDULED),
                TaskChange(ti.pk, T.SCHEDULED, T.QUEUED, 0, {"try_number": 1}),
            )
        ],
        [],
        epoch=None,
    )
    await store.append_log(first.pk, 1, b"one ")
    tasks, _ = await store.commit_batch(
        [
            TaskChange(first.pk, T.QUEUED, T.RUNNING, 1, {"started_at": 1.0}),
            TaskChange(first.pk, T.RUNNING, T.SUCCESS, 1, {"ended_at": 2.0}),
        ],
        [],
        epoch=None,
        # Two pieces of one log and one of another: in order, after what is stored.
        logs=[(first.pk, 1, b"two "), (second.pk, 1, b"alone"), (first.pk, 1, b"three")],
        # A note for a try that is queued, and one for a try this batch ended: not kept.
        notes=[(second.pk, 1, "image_pull", "pulling"), (first.pk, 1, "image_pull", "x")],
    )
    assert tasks == [True, True]
    assert await store.read_log(first.pk, 1) == b"one two three"
    assert await store.read_log(second.pk, 1) == b"alone"
    assert await store.log_sizes([(first.pk, 1), (second.pk, 1), (first.pk, 2)]) == {
        (first.pk, 1): 13,
        (second.pk, 1): 5,
        (first.pk, 2): 0,
    }
    by_pk = {ti.pk: ti for ti in await store.list_task_instances(run_pk=run.pk)}
    assert (by_pk[second.pk].reason, by_pk[second.pk].message) == ("image_pull", "pulling")
    assert by_pk[first.pk].state is T.SUCCESS and by_pk[first.pk].reason != "image_pull"
