"""Cancelling a backfill from the web UI with a real scheduler and real processes:
its live runs fail, their tasks stop, and no further run is made."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.states import RunState
from leoflow.scheduler.core import Scheduler
from leoflow.store import Store
from leoflow.store.backfills import backfill_progress
from tests.integration.api.conftest import make_auth, make_settings
from tests.integration.api.test_web_ui_backfills import SPAN, act, login
from tests.integration.scheduler.conftest import SchedulerFactory
from tests.integration.scheduler.test_backfill_run import daily, wait_for


@pytest.fixture
async def ui(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, make_settings(tmp_path), auth=make_auth())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        yield client


async def test_cancel_from_the_ui_stops_the_backfill(
    make_scheduler: SchedulerFactory, store: Store, ui: httpx.AsyncClient, tmp_path: Path
) -> None:
    scheduler: Scheduler = await make_scheduler(daily(tmp_path, "sleep 60"))
    await scheduler.start()
    csrf = await login(ui, "operator")
    made = await act(ui, csrf, "backfill_create", {**SPAN, "end": "2026-01-05T23:59:59",
                                                   "max_active_runs": 2})  # fmt: skip
    assert made.status_code == 200, made.text
    pk = made.json()["pk"]

    async def two_running() -> bool:
        return (await backfill_progress(store, pk)).running == 2

    await wait_for(two_running)
    page = (await ui.get(f"/dags/daily/backfills/{pk}")).text
    assert page.count("running</span>") >= 3 and page.count("not made yet") == 3
    cancelled = await act(ui, csrf, "backfill_cancel", {"backfill": pk})
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    scheduler.wake()
    failed = [r for r in await store.list_runs(dag_id="daily") if r.state is RunState.FAILED]
    assert len(failed) == 2
    for run in failed:
        ended = await asyncio.wait_for(scheduler.wait_run(run.pk), 60)
        assert ended.state is RunState.FAILED

    async def tasks_stopped() -> bool:
        tis = [ti for run in failed for ti in await store.list_task_instances(run_pk=run.pk)]
        return all(ti.state.value == "failed" for ti in tis)

    await wait_for(tasks_stopped)
    # The driver's next pass over the backfills makes no run for the points left.
    await scheduler._backfills.advance()
    progress = await backfill_progress(store, pk)
    assert (progress.pending, progress.failed, progress.total) == (3, 2, 5)
    assert len(await store.list_runs(dag_id="daily")) == 2
    page = (await ui.get(f"/dags/daily/backfills/{pk}")).text
    assert "cancelled by operator" in page and 'id="cancel-backfill"' not in page
    assert "<strong>2</strong>/5 done" in page
