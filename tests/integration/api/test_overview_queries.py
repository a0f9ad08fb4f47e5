"""The overview queries (leoflow/store/overview.py) agree with the plain listings
they replace, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import DAG_YAML, put_dag
from tests.integration.api.seed import move

SEEDS = [TaskSeed("a", "default_pool", 1, 0, 1), TaskSeed("b", "default_pool", 1, 5, 1)]
# dag -> states of its runs, oldest first
PLAN = {
    "d1": [RunState.SUCCESS, RunState.FAILED, RunState.RUNNING, RunState.QUEUED, RunState.QUEUED],
    "d2": [RunState.RUNNING],
    "d3": [RunState.SUCCESS, RunState.FAILED],
}


async def _seed(store: Store) -> None:
    # Interleaved, so each DAG's pks are not contiguous.
    for i in range(max(len(v) for v in PLAN.values())):
        for dag_id, states in PLAN.items():
            if i >= len(states):
                continue
            run = await store.create_run(
                dag_id, f"r{i}", run_type="manual", logical_date=None, conf={"i": i},
                tasks=SEEDS, epoch=None,
            )  # fmt: skip
            target = states[i]
            if target is not RunState.QUEUED:
                await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
            if target in (RunState.SUCCESS, RunState.FAILED):
                await store.transition_run(run.pk, RunState.RUNNING, target, epoch=None)
            if target is RunState.RUNNING:
                tis = await store.list_task_instances(run_pk=run.pk)
                await move(store, tis[0].pk, TaskState.SCHEDULED)
                await move(store, tis[1].pk, TaskState.SCHEDULED, TaskState.QUEUED)


async def test_counts_and_runs_per_dag_match_the_listings(any_store: Store) -> None:
    await _seed(any_store)
    every = await any_store.list_runs(limit=1000)
    active = [RunState.QUEUED, RunState.RUNNING]
    expected = Counter((r.dag_id, r.state.value) for r in every if r.state in active)
    assert await any_store.count_runs_by_dag(active) == expected
    assert expected[("d1", "queued")] == 2

    for per_dag in (1, 2, 10):
        got = await any_store.runs_per_dag(["d1", "d2", "d3", "none"], per_dag)
        for dag_id in ("d1", "d2", "d3"):
            want = await any_store.list_runs(dag_id=dag_id, limit=per_dag)
            assert got[dag_id] == want, (dag_id, per_dag)
        assert got["none"] == []
    oldest = await any_store.runs_per_dag(["d1"], 1, states=[RunState.QUEUED], oldest_first=True)
    assert [r.run_id for r in oldest["d1"]] == ["r3"]
    assert oldest["d1"][0].conf == {"i": 3}
    assert await any_store.runs_per_dag([], 5) == {}


async def test_task_states_and_counts_match_the_listings(any_store: Store) -> None:
    await _seed(any_store)
    runs = await any_store.list_runs(limit=1000)
    pks = [r.pk for r in runs[:4]]
    states = await any_store.task_states_of_runs(pks)
    for pk in pks:
        want = {ti.task_id: ti.state for ti in await any_store.list_task_instances(run_pk=pk)}
        assert states[pk] == want
    assert await any_store.task_states_of_runs([]) == {}

    tis = await any_store.list_task_instances()
    counted = await any_store.count_task_instances([TaskState.SCHEDULED, TaskState.QUEUED])
    assert counted == Counter(
        t.state.value for t in tis if t.state in (TaskState.SCHEDULED, TaskState.QUEUED)
    )
    assert counted["scheduled"] == 2 and counted["queued"] == 2
    created = await any_store.run_created_at(pks)
    assert created == {r.pk: r.created_at for r in runs[:4]}


async def test_scheduled_in_admission_order(any_store: Store) -> None:
    await _seed(any_store)
    runs = {r.pk: r for r in await any_store.list_runs(limit=1000)}
    scheduled = await any_store.list_task_instances(states=[TaskState.SCHEDULED])
    want = sorted(
        scheduled, key=lambda t: (-t.priority, runs[t.run_pk].created_at, t.ready_at or 0, t.pk)
    )
    first, ages = await any_store.scheduled_in_admission_order(10)
    assert first == want
    assert ages == {t.run_pk: runs[t.run_pk].created_at for t in want}
    one, _ = await any_store.scheduled_in_admission_order(1)
    assert one == want[:1]


async def test_dag_heads_and_dags_by_id_match_list_dags(any_store: Store) -> None:
    await put_dag(any_store)
    await put_dag(any_store, DAG_YAML.replace("dag_id: etl", "dag_id: other"), paused=True)
    await any_store.set_dag_error("api:other", "bad file")
    listed = await any_store.list_dags()
    heads = await any_store.dag_heads()
    assert [(h.dag_id, h.paused, h.active, h.last_error) for h in heads] == [
        (d.dag_id, d.paused, d.active, d.last_error) for d in listed
    ]
    assert heads[1].paused and heads[1].last_error == "bad file"
    by_id = await any_store.dags_by_id(["other", "etl", "missing"])
    assert sorted(by_id) == ["etl", "other"]
    for d in listed:
        assert by_id[d.dag_id] == replace(d, source=None)
    assert await any_store.dags_by_id([]) == {}
