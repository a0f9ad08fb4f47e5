"""``leoflow backfill`` as a subprocess against a live API whose store a scheduler drives."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.server import RunningApi, start_server
from leoflow.store import Store
from leoflow.store.backfills import backfill_progress, list_backfills
from tests.e2e.conftest import REPO
from tests.integration.api.conftest import TOKENS, auth_header, make_auth, make_settings
from tests.integration.scheduler.conftest import SchedulerFactory, dag
from tests.integration.scheduler.test_backfill_run import daily, wait_for


@pytest.fixture
async def live(store: Store, tmp_path: Path) -> AsyncIterator[RunningApi]:
    app = create_app(store, make_settings(tmp_path), auth=make_auth())
    running = await start_server(app, "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


async def start_cli(live: RunningApi, *argv: str) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env.update({"LEOFLOW_SERVER": live.url, "LEOFLOW_TOKEN": TOKENS["operator"]})
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "leoflow", "backfill", *argv,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_dry_run_follow_and_refusal(
    live: RunningApi, make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    scheduler = await make_scheduler(daily(tmp_path, "true"))
    await scheduler.start()
    span = ("daily", "--from", "2026-03-01", "--to", "2026-03-06")
    code, out, _ = await finish(await start_cli(live, *span, "--dry-run"))
    assert code == 0 and out.splitlines()[0] == "daily: 6 runs, at most 5 at a time"
    assert "2026-03-06T00:00:00Z" in out and await list_backfills(store) == []

    code, out, err = await finish(await start_cli(live, *span, "--max-active-runs", "2"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("backfill 1 of daily: running  0/6 done")
    assert lines[-1].startswith("backfill 1 of daily: success  6/6 done (6 ok, 0 failed)")

    code, _, err = await finish(await start_cli(live, "daily", "--from", "2026-03-01T01:00",
                                                "--to", "2026-03-01T02:00"))  # fmt: skip
    assert code == 1 and "422" in err and "no cron point" in err
    code, _, err = await finish(await start_cli(live, "daily", "--from", "yesterday",
                                                "--to", "2026-03-01"))  # fmt: skip
    assert code == 1 and "--from 'yesterday' is not an ISO 8601" in err
    code, _, err = await finish(await start_cli(live, "daily", "--from", "0001-01-01",
                                                "--to", "2026-03-01"))  # fmt: skip
    assert code == 1 and "--from: 0001-01-01T00:00:00+00:00 is outside the dates" in err, err
    assert "Traceback" not in err


async def test_ctrl_c_cancels_the_backfill_as_a_whole(
    live: RunningApi, make_scheduler: SchedulerFactory, store: Store, tmp_path: Path
) -> None:
    scheduler = await make_scheduler(daily(tmp_path, "sleep 60"))
    await scheduler.start()
    proc = await start_cli(live, "daily", "--from", "2026-03-01", "--to", "2026-03-09",
                           "--max-active-runs", "3")  # fmt: skip

    async def three_running() -> bool:
        backfills = await list_backfills(store)
        return bool(backfills) and (await backfill_progress(store, backfills[0].pk)).running == 3

    await wait_for(three_running)
    proc.send_signal(signal.SIGINT)
    code, _, err = await finish(proc)
    assert code == 130 and "cancelled" in err
    (backfill,) = await list_backfills(store)
    assert backfill.state == "cancelled"
    progress = await backfill_progress(store, backfill.pk)
    # A run the scheduler made while the cancel committed is failed as it is linked.
    assert progress.active == 0 and progress.failed >= 3
    assert progress.failed + progress.pending == 9
    for run in await store.list_runs(dag_id="daily"):
        assert run.state.value == "failed" and "backfill" in (run.message or "")


async def test_to_a_day_includes_that_day_in_the_cli_the_api_and_the_ui(
    live: RunningApi, make_scheduler: SchedulerFactory
) -> None:
    """A cron at 06:00: ``--to 2026-03-06`` includes 2026-03-06T06:00, as the help says,
    through the CLI, the API's JSON and the web UI's action alike (one rule)."""
    spec = dag('dag_id: six\nschedule: "0 6 * * *"\ntasks:\n  t: {command: "true"}\n')
    await make_scheduler(spec)
    code, out, err = await finish(
        await start_cli(live, "six", "--from", "2026-03-05", "--to", "2026-03-06", "--dry-run")
    )
    assert code == 0, err
    assert out.split() == ["six:", "2", "runs,", "at", "most", "1", "at", "a", "time",
                           "2026-03-05T06:00:00Z", "2026-03-06T06:00:00Z"]  # fmt: skip
    expected = ["2026-03-05T06:00:00Z", "2026-03-06T06:00:00Z"]
    async with httpx.AsyncClient(base_url=live.url) as client:
        body = {"from": "2026-03-05", "to": "2026-03-06", "dry_run": True}
        planned = await client.post(
            "/api/v1/dags/six/backfills", json=body, headers=auth_header("operator")
        )
        assert planned.status_code == 200, planned.text
        assert planned.json()["logical_dates"] == expected
    ui = (REPO / "leoflow/api/ui/static/ui.js").read_text()
    # The page sends the day's last instant in the zone it shows dates in (checked in a
    # browser by tests/e2e/test_web_ui_details.py); in UTC that is the API's reading.
    assert "zonedToUtc(y, mo, d, 23, 59, 59, zone).getTime() + 999" in ui


async def test_backfill_json_prints_one_document(
    live: RunningApi, make_scheduler: SchedulerFactory, tmp_path: Path
) -> None:
    """Following with --json: no progress lines, the finished backfill as one document."""
    scheduler = await make_scheduler(daily(tmp_path, "true"))
    await scheduler.start()
    span = ("daily", "--from", "2026-03-01", "--to", "2026-03-02", "--json")
    code, out, err = await finish(await start_cli(live, *span))
    assert code == 0, err
    done = json.loads(out)
    assert (done["dag_id"], done["state"]) == ("daily", "success")
    assert done["progress"]["success"] == 2
    code, out, err = await finish(await start_cli(live, *span, "--dry-run"))
    assert code == 0, err
    plan = json.loads(out)
    assert plan["logical_dates"] == [] and len(plan["skipped"]) == 2
