"""One DAG whose handling raises is that DAG's error: the scheduler's loop, its other
DAGs and its next start go on (a real scheduler on a real SQLite store)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.cron import CronSchedule
from leoflow.domain.states import RunState
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag

START = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _minutely(dag_id: str, zone: str) -> str:
    return (
        f"dag_id: {dag_id}\nschedule: '* * * * *'\ntimezone: {zone}\ncatchup: true\n"
        f"start_date: '{START}'\ntasks: {{a: {{command: 'true'}}}}\n"
    )


async def _dates(store: Store, dag_id: str) -> list[float]:
    runs = await store.list_runs(dag_id=dag_id, limit=1000)
    return sorted(r.logical_date or 0.0 for r in runs)


async def test_a_dag_whose_schedule_raises_is_its_own_error_and_the_others_run_on(
    make_scheduler: SchedulerFactory,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    real = CronSchedule.next_after

    def next_after(self: CronSchedule, moment: datetime) -> datetime | None:
        if self.timezone == "Asia/Tokyo":  # the poisoned DAG's schedule only
            raise OverflowError("date value out of range")
        return real(self, moment)

    monkeypatch.setattr(CronSchedule, "next_after", next_after)
    caplog.set_level(logging.INFO, logger="leoflow.scheduler")
    good, bad = dag(_minutely("good", "UTC")), dag(_minutely("bad", "Asia/Tokyo"))
    scheduler = await make_scheduler(bad, good)
    for _ in range(3):
        await scheduler._poll.run()  # raised out of the poll (and the loop) before
    assert len(await _dates(store, "good")) >= 3
    assert await _dates(store, "bad") == []
    (error,) = [e for f, e in await store.list_dag_errors() if f == "bad.yaml"]
    assert "the scheduler could not schedule it or create its runs" in error
    assert "OverflowError: date value out of range" in error
    assert "other DAGs keep running" in error
    said = [r.getMessage() for r in caplog.records if "DAG bad:" in r.getMessage()]
    assert len(said) == 1, said  # once, not once per poll

    # The loop itself runs on: a trigger of the good DAG still completes.
    await scheduler.start()
    row = await scheduler.trigger("good")
    assert (await scheduler.wait_run(row.pk)).state is RunState.SUCCESS
    assert scheduler.failure is None
    await scheduler.stop()

    # Fixed (the next version, or the next start): the DAG schedules, its error clears.
    monkeypatch.setattr(CronSchedule, "next_after", real)
    again = await make_scheduler()
    await again._poll.run()
    assert len(await _dates(store, "bad")) >= 3
    assert [f for f, _ in await store.list_dag_errors()] == []


async def test_a_run_the_store_refuses_is_that_dags_error(
    make_scheduler: SchedulerFactory, store: Store
) -> None:
    good = dag(_minutely("good", "UTC"))
    # A priority past the store's 32-bit column, as an older version let through: the
    # insert of the run fails, not the scheduler.
    task = good.tasks["a"].model_copy(update={"priority": 10**30})
    huge = good.model_copy(update={"dag_id": "huge", "tasks": {"a": task}})
    scheduler = await make_scheduler(good)
    await store.upsert_dag("huge", fileloc="huge.yaml", spec_json="{}", spec_hash="x", source=None)
    await scheduler._follower.sync_definitions()
    scheduler.book.dags["huge"] = huge  # as if its stored spec had been read
    await scheduler._creation.create_due_runs()
    assert len(await _dates(store, "good")) >= 3
    assert await _dates(store, "huge") == []
    (error,) = [e for f, e in await store.list_dag_errors() if f == "huge.yaml"]
    assert "could not schedule it or create its runs" in error


async def test_a_mapped_task_whose_expansion_raises_fails_alone(
    make_scheduler: SchedulerFactory, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import leoflow.scheduler.mapping as mapping
    from leoflow.domain.mapping import plan_expansion as real

    def plan(task: Any, *args: Any) -> Any:
        if task.env.get("POISON"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(task, *args)

    monkeypatch.setattr(mapping, "plan_expansion", plan)
    mapped = "tasks: {each: {command: 'true', map_over: [1, 2], env: {POISON: '%s'}}}\n"
    bad, good = dag("dag_id: bad\n" + mapped % "1"), dag("dag_id: good\n" + mapped % "")
    scheduler = await make_scheduler(bad, good)
    await scheduler.start()
    bad_run = await scheduler.trigger("bad")
    assert (await scheduler.wait_run(bad_run.pk)).state is RunState.FAILED
    (each,) = await store.list_task_instances(run_pk=bad_run.pk)
    assert each.reason == "map_failed"
    assert each.message == (
        "map_over: making the items failed (RecursionError: maximum recursion depth exceeded)"
    )
    good_run = await scheduler.trigger("good")
    assert (await scheduler.wait_run(good_run.pk)).state is RunState.SUCCESS
    assert scheduler.failure is None
