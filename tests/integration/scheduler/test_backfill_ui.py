"""Cancelling a backfill from the web UI with a real scheduler and real processes:
its live runs fail, their tasks stop, and no further run is made."""

from __future__ import annotations

from pathlib import Path

import httpx

from leoflow.scheduler.core import Scheduler
from leoflow.store import Store
from leoflow.store.backfills import backfill_progress
from tests.integration.api.test_web_ui_backfills import SPAN, act, login
from tests.integration.scheduler.conftest import SchedulerFactory

# ``api``: the app with the test tokens over ASGI; its UI is what this test drives.
from tests.integration.scheduler.test_backfill_run import (  # noqa: F401
    api,
    check_cancelled,
    daily,
    wait_for,
)


async def test_cancel_from_the_ui_stops_the_backfill(
    make_scheduler: SchedulerFactory,
    store: Store,
    api: httpx.AsyncClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    ui = api
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
    await check_cancelled(scheduler, store, pk)
    page = (await ui.get(f"/dags/daily/backfills/{pk}")).text
    assert "cancelled by operator" in page and 'id="cancel-backfill"' not in page
    assert "<strong>2</strong>/5 done" in page
