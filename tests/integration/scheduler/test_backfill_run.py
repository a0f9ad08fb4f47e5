"""Backfills end to end: asked through the API, driven by the scheduler, real processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.states import RunState
from leoflow.scheduler.core import Scheduler
from leoflow.store import Store
from leoflow.store.backfills import backfill_progress, get_backfill
from tests.integration.api.conftest import auth_header, make_auth, make_settings
from tests.integration.scheduler.conftest import SchedulerFactory, dag

OPERATOR = auth_header("operator")


@pytest.fixture
async def api(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, make_settings(tmp_path), auth=make_auth())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


def daily(out: Path, command: str, max_active_runs: int = 5) -> Any:
    return dag(
        f"""
dag_id: daily
schedule: "@daily"
max_active_runs: {max_active_runs}
tasks:
  load:
    command: {command!r}
    env: {{OUT: "{out}"}}
"""
    )


async def wait_for(predicate: Any, timeout: float = 120.0) -> None:
    async def loop() -> None:
        while not await predicate():  # noqa: ASYNC110 - the store has no event to await
            await asyncio.sleep(0.05)

    await asyncio.wait_for(loop(), timeout)


async def check_cancelled(scheduler: Scheduler, store: Store, pk: int) -> None:
    """Backfill ``pk`` of 5 points, 2 of them running, was just cancelled: those two
    fail with their tasks, and the driver's next pass makes no run for the other 3."""
    scheduler.wake()
    live = [r for r in await store.list_runs(dag_id="daily") if r.state is RunState.FAILED]
    assert len(live) == 2
    for run in live:
        ended = await asyncio.wait_for(scheduler.wait_run(run.pk), 60)
        assert ended.state is RunState.FAILED

    async def tasks_stopped() -> bool:
        tis = [ti for run in live for ti in await store.list_task_instances(run_pk=run.pk)]
        return all(ti.state.value == "failed" for ti in tis)

    await wait_for(tasks_stopped)
    await scheduler._backfills.advance()
    progress = await backfill_progress(store, pk)
    assert (progress.pending, progress.failed, progress.total) == (3, 2, 5)
    assert len(await store.list_runs(dag_id="daily")) == 2


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    return peak


async def test_31_days_with_max_active_runs_3(
    make_scheduler: SchedulerFactory, store: Store, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    spec = daily(
        tmp_path,
        'echo "$LEOFLOW_LOGICAL_DATE $LEOFLOW_DATA_INTERVAL_START $LEOFLOW_DATA_INTERVAL_END"'
        ' > "$OUT/$LEOFLOW_RUN_ID"',
    )
    scheduler: Scheduler = await make_scheduler(spec)
    peak: list[int] = [0]

    def on_run(run: Any) -> None:
        peak[0] = max(peak[0], sum(1 for r in scheduler.book.runs.values() if r.dag_id == "daily"))

    scheduler.on_run_change = on_run
    await scheduler.start()
    response = await api.post(
        "/api/v1/dags/daily/backfills",
        json={"from": "2026-01-01", "to": "2026-01-31", "max_active_runs": 3},
        headers=OPERATOR,
    )
    assert response.status_code == 201, response.text
    pk = response.json()["pk"]
    assert response.json()["progress"]["total"] == 31

    async def ended() -> bool:
        row = await get_backfill(store, pk)
        return row is not None and row.state != "running"

    await wait_for(ended)
    row = await get_backfill(store, pk)
    assert row is not None and row.state == "success", row
    progress = await backfill_progress(store, pk)
    assert (progress.success, progress.failed, progress.pending) == (31, 0, 0)
    runs = [r for r in await store.list_runs(dag_id="daily", limit=100)]
    assert len(runs) == 31 and {r.run_type for r in runs} == {"backfill"}
    assert all(r.state is RunState.SUCCESS and r.ended_at is not None for r in runs)
    assert most_at_once([(r.created_at, r.ended_at or 0.0) for r in runs]) <= 3
    assert peak[0] == 3
    for run in runs:
        assert run.logical_date is not None
        date = datetime.fromtimestamp(run.logical_date, UTC)
        written = (tmp_path / run.run_id).read_text().split()
        before = datetime.fromtimestamp(run.logical_date - 86400, UTC)
        assert written == [date.isoformat(), before.isoformat(), date.isoformat()]
    progress_out = (await api.get(f"/api/v1/backfills/{pk}", headers=OPERATOR)).json()
    assert len(progress_out["runs"]) == 31 and progress_out["pending"] == []
    again = await api.post(
        "/api/v1/dags/daily/backfills",
        json={"from": "2026-01-01", "to": "2026-01-31"},
        headers=OPERATOR,
    )
    assert again.status_code == 409 and "every one of the 31" in again.json()["detail"]


async def test_cancel_stops_the_live_runs_and_makes_no_more(
    make_scheduler: SchedulerFactory, store: Store, api: httpx.AsyncClient, tmp_path: Path
) -> None:
    scheduler: Scheduler = await make_scheduler(daily(tmp_path, "sleep 60"))
    await scheduler.start()
    response = await api.post(
        "/api/v1/dags/daily/backfills",
        json={"from": "2026-01-01", "to": "2026-01-05", "max_active_runs": 2},
        headers=OPERATOR,
    )
    pk = response.json()["pk"]

    async def two_running() -> bool:
        return (await backfill_progress(store, pk)).running == 2

    await wait_for(two_running)
    cancelled = await api.post(f"/api/v1/backfills/{pk}/cancel", headers=OPERATOR)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    await check_cancelled(scheduler, store, pk)
    again = await api.post(f"/api/v1/backfills/{pk}/cancel", headers=OPERATOR)
    assert again.status_code == 409
