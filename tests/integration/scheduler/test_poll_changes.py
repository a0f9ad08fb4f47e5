"""The store poll reads the store only when something was committed since the last
one, yet sees every other writer's change and still fires cron on time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.states import RunState
from leoflow.executor.subprocess import SubprocessExecutor
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.store import Store, TaskSeed
from tests.integration.scheduler.conftest import SchedulerFactory, dag


def _count_calls(monkeypatch: pytest.MonkeyPatch, store: Store, name: str) -> list[int]:
    """Counts calls of one store read; the real read still runs."""
    calls = [0]
    real: Callable[..., Any] = getattr(store, name)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, name, counted)
    return calls


async def test_the_marker_moves_on_every_commit_of_any_connection_and_only_then(
    store: Store, tmp_path: Path
) -> None:
    first = store.changes.marker()
    assert first is not None
    await store.list_runs(states=[RunState.QUEUED], limit=10)
    assert store.changes.marker() == first  # reads commit nothing
    await store.upsert_pool("p", 3)  # the store's own pooled connection
    second = store.changes.marker()
    assert second != first
    other = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    try:
        await other.upsert_pool("q", 2)  # another writer of the same file
    finally:
        await other.close()
    assert store.changes.marker() not in (second, None)


async def test_an_in_memory_store_counts_its_own_writes_which_are_the_only_ones() -> None:
    memory = await Store.open("sqlite://")
    try:
        first = memory.changes.marker()
        assert first is not None
        await memory.list_runs(states=[RunState.QUEUED], limit=10)
        assert memory.changes.marker() == first  # reads commit nothing
        await memory.upsert_pool("p", 3)
        assert memory.changes.marker() not in (first, None)
    finally:
        await memory.close()


async def test_an_idle_poll_reads_nothing_and_another_writers_change_is_still_seen(
    make_scheduler: SchedulerFactory,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = dag("dag_id: idle\ntasks: {a: {command: 'true'}}\n")
    scheduler: Scheduler = await make_scheduler(spec)
    await scheduler._poll.run()
    list_runs = _count_calls(monkeypatch, store, "list_runs")
    list_pools = _count_calls(monkeypatch, store, "list_pools")
    for _ in range(5):
        await scheduler._poll.run()
    assert (list_runs[0], list_pools[0]) == (0, 0)
    other = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    try:
        await other.upsert_pool("wide", 7)
        await other.create_run(
            "idle",
            "from_elsewhere",
            run_type="manual",
            logical_date=None,
            conf={},
            tasks=[TaskSeed("a", "default_pool", 1, 0, 1)],
            epoch=None,
        )
    finally:
        await other.close()
    await scheduler._poll.run()
    assert (list_runs[0], list_pools[0]) == (1, 1)
    assert scheduler.book.admission.pool_sizes()["wide"] == 7
    assert [r.run_id for r in scheduler.book.runs.values()] == ["from_elsewhere"]


async def test_cron_fires_when_its_time_comes_though_nothing_was_written(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = dag("dag_id: every_minute\nschedule: '* * * * *'\ntasks: {a: {command: 'true'}}\n")
    await store.upsert_dag(
        spec.dag_id, fileloc="m.yaml", spec_json=spec.model_dump_json(), spec_hash="h", source=None
    )
    epoch = await store.take_office("cron-test")
    now = [1_800_000_030.0]  # half a minute past a fire time
    scheduler = Scheduler(
        store, SubprocessExecutor(), SchedulerConfig(), epoch=epoch, clock=lambda: now[0]
    )
    await scheduler._poll.run()
    await scheduler._poll.run()  # the store is now unchanged since the last full poll
    list_runs = _count_calls(monkeypatch, store, "list_runs")
    now[0] += 20.0
    await scheduler._poll.run()
    assert await store.list_runs(dag_id="every_minute", limit=10) == []
    now[0] += 20.0  # past the next minute
    await scheduler._poll.run()
    runs = await store.list_runs(dag_id="every_minute", limit=10)
    assert [(r.run_type, r.logical_date) for r in runs] == [("scheduled", 1_800_000_060.0)]
    # The clock-only polls read no runs (the two calls above are this test's own).
    assert list_runs[0] == 2
