from __future__ import annotations

import pytest

from leoflow.domain.states import IllegalTransition, RunState, TaskState
from leoflow.store import RunExists, Store

from .helpers import compiled_statements, make_run, seeds


async def test_create_run_with_its_task_instances(store: Store) -> None:
    run = await store.create_run(
        "dag",
        "manual__1",
        run_type="manual",
        logical_date=None,
        conf={"target": "prod", "n": [1, 2]},
        tasks=seeds(5, pool="warehouse"),
        epoch=None,
    )
    assert run.state is RunState.QUEUED and run.run_type == "manual"
    assert run.conf == {"target": "prod", "n": [1, 2]}
    assert await store.get_run(run.pk) == run
    assert await store.find_run("dag", "manual__1") == run
    assert await store.find_run("dag", "other") is None
    assert await store.get_run(run.pk + 1000) is None

    tis = await store.list_task_instances(run_pk=run.pk)
    assert [ti.task_id for ti in tis] == [f"t{i:04d}" for i in range(5)]
    for i, ti in enumerate(tis):
        assert ti.state is TaskState.NONE and ti.try_number == 0 and ti.max_tries == 3
        assert (ti.run_pk, ti.dag_id, ti.run_id) == (run.pk, "dag", "manual__1")
        assert (ti.pool, ti.pool_slots, ti.priority) == ("warehouse", 1, i % 7)
        assert ti.queued_at is None and ti.exit_code is None and ti.executor_ref is None
        assert await store.get_task_instance(ti.pk) == ti


async def test_duplicate_run_raises_and_writes_nothing(store: Store) -> None:
    run = await make_run(store, tasks=2)
    with pytest.raises(RunExists):
        await make_run(store, tasks=4)
    assert len(await store.list_task_instances(run_pk=run.pk)) == 2
    assert len(await store.list_task_instances()) == 2
    # Same run id in another DAG is fine.
    await make_run(store, dag_id="other", tasks=1)


async def test_making_runs_compiles_no_statement_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's INSERT ... ON CONFLICT has no SQLAlchemy cache key: it was compiled
    again for every run made. Once the first run has made the SQL, the others reuse it."""
    await make_run(store, run_id="first", tasks=3)
    compiled = compiled_statements(monkeypatch)
    made = [await make_run(store, run_id=f"r{i}", tasks=3) for i in range(5)]
    made.append(await store.create_run(
        "dag", None, run_type="manual", logical_date=None, conf={}, tasks=seeds(2), epoch=None
    ))  # fmt: skip
    inserts = [sql for sql in compiled if sql.startswith("INSERT INTO dag_runs")]
    assert inserts == []
    assert len({run.pk for run in made}) == len(made)
    for run in made:
        assert await store.get_run(run.pk) == run
    with pytest.raises(RunExists):
        await make_run(store, run_id="r0", tasks=1)


async def test_duplicate_task_ids_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        await store.create_run(
            "dag", "r", run_type="manual", logical_date=None, conf={},
            tasks=seeds(2) + seeds(1), epoch=None,
        )  # fmt: skip
    assert await store.find_run("dag", "r") is None


async def test_transition_run_cas_and_fields(store: Store) -> None:
    run = await make_run(store)
    assert await store.transition_run(
        run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None, started_at=10.5
    )
    # Lost race: the run is no longer queued.
    assert not await store.transition_run(run.pk, RunState.QUEUED, RunState.FAILED, epoch=None)
    assert await store.transition_run(
        run.pk, RunState.RUNNING, RunState.SUCCESS, epoch=None, ended_at=20.0, message="ok"
    )
    got = await store.get_run(run.pk)
    assert got is not None
    assert (got.state, got.started_at, got.ended_at, got.message) == (
        RunState.SUCCESS, 10.5, 20.0, "ok",
    )  # fmt: skip


async def test_illegal_run_transition_refused(store: Store) -> None:
    run = await make_run(store)
    with pytest.raises(IllegalTransition):
        await store.transition_run(run.pk, RunState.QUEUED, RunState.SUCCESS, epoch=None)
    with pytest.raises(TypeError):
        await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None, state="x")
    got = await store.get_run(run.pk)
    assert got is not None and got.state is RunState.QUEUED


async def test_last_scheduled_run(store: Store) -> None:
    assert await store.last_scheduled_run("dag") is None
    await make_run(store, run_id="s2", run_type="scheduled", logical_date=2000.0)
    await make_run(store, run_id="s1", run_type="scheduled", logical_date=1000.0)
    await make_run(store, run_id="m", run_type="manual", logical_date=9000.0)
    await make_run(store, dag_id="other", run_id="s9", run_type="scheduled", logical_date=9e9)
    last = await store.last_scheduled_run("dag")
    assert last is not None and last.run_id == "s2" and last.logical_date == 2000.0


async def test_list_runs_keyset_pagination(store: Store) -> None:
    made = []
    for i in range(230):
        run = await store.create_run(
            "a" if i % 3 else "b", f"r{i}", run_type="manual", logical_date=None, conf={},
            tasks=[], epoch=None,
        )  # fmt: skip
        made.append(run)
        if i % 5 == 0:
            await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)

    async def collect(**filters: object) -> list[int]:
        pks: list[int] = []
        before = None
        while True:
            page = await store.list_runs(limit=100, before_pk=before, **filters)  # type: ignore[arg-type]
            assert len(page) <= 100
            pks.extend(run.pk for run in page)
            if len(page) < 100:
                return pks
            before = page[-1].pk

    every = sorted((r.pk for r in made), reverse=True)
    assert await collect() == every
    assert await collect(dag_id="b") == [r.pk for r in reversed(made) if r.dag_id == "b"]
    running = [r.pk for i, r in reversed(list(enumerate(made))) if i % 5 == 0]
    assert await collect(states=[RunState.RUNNING]) == running
    both = [r.pk for i, r in reversed(list(enumerate(made))) if i % 5 == 0 and r.dag_id == "a"]
    assert await collect(dag_id="a", states={RunState.RUNNING}) == both
    assert await collect(states=[RunState.QUEUED, RunState.RUNNING]) == every
    assert await store.list_runs(states=[RunState.SUCCESS]) == []
    page = await store.list_runs(limit=3)
    assert [r.run_id for r in page] == ["r229", "r228", "r227"]
    assert page[0].state is RunState.QUEUED and page[0].conf == {}
