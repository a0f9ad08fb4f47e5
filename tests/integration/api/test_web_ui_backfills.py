"""The web UI's backfill pages and a run's missed deadline, over ASGI: content,
404s, and the create/cancel actions with their CSRF and role checks.

Cancel through the UI with a real scheduler: tests/integration/scheduler/test_backfill_ui.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.states import RunState
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.backfills import get_backfill, link_run, list_backfills
from leoflow.store.deadlines import mark_deadline_missed
from tests.integration.api.conftest import TOKENS, make_auth, put_dag

BASE = "http://localhost"
SAME = {"Origin": BASE, "Content-Type": "application/json"}
DAILY = """\
dag_id: daily
schedule: "0 3 * * *"
max_active_runs: 4
deadline: 2h
run_timeout: 1h
tasks:
  t:
    command: echo
"""
SPAN: dict[str, object] = {"dag_id": "daily", "start": "2026-01-01", "end": "2026-01-10T23:59:59"}


def stamp(day: int) -> float:
    return datetime(2026, 1, day, 3, tzinfo=UTC).timestamp()


@pytest.fixture
async def ui(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await put_dag(store, DAILY)
    app = create_app(store, settings, auth=make_auth())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


async def login(c: httpx.AsyncClient, role: str) -> str:
    r = await c.post("/ui/login", json={"token": TOKENS[role]}, headers={"Origin": BASE})
    assert r.status_code == 200, r.text
    page = await c.get("/dags/daily/backfills")
    assert page.status_code == 200, page.text
    marker = 'name="csrf-token" content="'
    start = page.text.index(marker) + len(marker)
    return page.text[start : page.text.index('"', start)]


async def act(
    c: httpx.AsyncClient, csrf: str, action: str, body: dict[str, object]
) -> httpx.Response:
    return await c.post(f"/ui/actions/{action}", json=body, headers={**SAME, "X-CSRF-Token": csrf})


async def test_create_preview_and_the_pages_show_the_backfill(
    ui: httpx.AsyncClient, store: Store
) -> None:
    csrf = await login(ui, "operator")
    dag = (await ui.get("/dags/daily")).text
    assert 'id="backfill-open"' in dag and 'id="backfill-dialog"' in dag
    assert "Deadline" in dag and "<code>2h00m</code>" in dag
    plan = await act(ui, csrf, "backfill_create", {**SPAN, "dry_run": True})
    assert plan.status_code == 200, plan.text
    assert len(plan.json()["logical_dates"]) == 10
    assert plan.json()["logical_dates"][0] == "2026-01-01T03:00:00Z"
    assert await list_backfills(store) == []  # a preview makes nothing
    made = await act(ui, csrf, "backfill_create", {**SPAN, "max_active_runs": 3})
    assert made.status_code == 200 and made.json()["state"] == "running", made.text
    pk = made.json()["pk"]
    # Two points get runs: one succeeded, one running.
    for day, end in ((1, RunState.SUCCESS), (2, RunState.RUNNING)):
        run = await store.create_run(
            "daily", f"backfill__{day}", run_type="backfill", logical_date=stamp(day), conf={},
            tasks=[], epoch=None,
        )  # fmt: skip
        await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
        if end is RunState.SUCCESS:
            await store.transition_run(run.pk, RunState.RUNNING, end, epoch=None)
        assert await link_run(store, pk, stamp(day), run.pk, epoch=None)
    listing = (await ui.get("/dags/daily/backfills")).text
    assert f'href="/dags/daily/backfills/{pk}"' in listing
    assert "<strong>1</strong>/10 done" in listing
    assert "by operator" in listing and "2026-01-01T03:00:00Z" in listing
    assert "2026-01-10T03:00:00Z" in listing
    for words in ("success</span> 1", "running</span> 1", "pending</span> 8"):
        assert words in listing, words
    detail = await ui.get(f"/dags/daily/backfills/{pk}")
    assert detail.status_code == 200
    page = detail.text
    assert 'id="cancel-backfill"' in page and "<dd>3</dd>" in page
    assert 'href="/dags/daily/runs/backfill__1"' in page
    assert 'href="/dags/daily/runs/backfill__2"' in page
    assert page.count("not made yet") == 8
    # A second running backfill is refused, with the API's own words.
    again = await act(ui, csrf, "backfill_create", SPAN)
    assert again.status_code == 409 and f"already has a running backfill ({pk})" in again.text


async def test_unknown_backfills_and_bad_input(ui: httpx.AsyncClient, store: Store) -> None:
    csrf = await login(ui, "operator")
    for path in ("/dags/daily/backfills/999", "/dags/daily/backfills/x1", "/dags/nope/backfills"):
        r = await ui.get(path)
        assert r.status_code == 404, path
    made = await act(ui, csrf, "backfill_create", SPAN)
    pk = made.json()["pk"]
    await put_dag(store, DAILY.replace("daily", "other"))
    # The backfill is daily's: under another DAG's path it is not found.
    assert (await ui.get(f"/dags/other/backfills/{pk}")).status_code == 404
    assert (await act(ui, csrf, "backfill_cancel", {"backfill": 999})).status_code == 404
    future = await act(
        ui, csrf, "backfill_create", {**SPAN, "dag_id": "other", "end": "2999-01-01"}
    )
    assert future.status_code == 422 and "in the future" in future.text
    bad = await act(ui, csrf, "backfill_create", {**SPAN, "dag_id": "other", "start": "soon"})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("from:")
    assert [b.dag_id for b in await list_backfills(store)] == ["daily"]


async def test_cancel_needs_the_role_and_csrf_then_works(
    ui: httpx.AsyncClient, store: Store
) -> None:
    csrf = await login(ui, "operator")
    pk = (await act(ui, csrf, "backfill_create", SPAN)).json()["pk"]
    viewer_csrf = await login(ui, "viewer")
    page = (await ui.get(f"/dags/daily/backfills/{pk}")).text
    assert 'id="cancel-backfill"' not in page  # hidden from a viewer...
    assert 'id="backfill-open"' not in (await ui.get("/dags/daily/backfills")).text
    refused = await act(ui, viewer_csrf, "backfill_cancel", {"backfill": pk})
    assert refused.status_code == 403 and "needs operator" in refused.text  # ...and refused
    forged = await act(ui, viewer_csrf, "backfill_create", SPAN)
    assert forged.status_code == 403
    csrf = await login(ui, "operator")
    no_csrf = await ui.post("/ui/actions/backfill_cancel", json={"backfill": pk}, headers=SAME)
    assert no_csrf.status_code == 403
    wrong = await act(ui, "0" * 64, "backfill_cancel", {"backfill": pk})
    assert wrong.status_code == 403
    cross = await ui.post(
        "/ui/actions/backfill_cancel", json={"backfill": pk},
        headers={**SAME, "Origin": "http://evil.test", "X-CSRF-Token": csrf},
    )  # fmt: skip
    assert cross.status_code == 403
    row = await get_backfill(store, pk)
    assert row is not None and row.state == "running"
    done = await act(ui, csrf, "backfill_cancel", {"backfill": pk})
    assert done.status_code == 200 and done.json() == {"pk": pk, "state": "cancelled"}
    row = await get_backfill(store, pk)
    assert row is not None and row.state == "cancelled" and row.message == "cancelled by operator"
    page = (await ui.get(f"/dags/daily/backfills/{pk}")).text
    assert 'id="cancel-backfill"' not in page and "cancelled by operator" in page
    twice = await act(ui, csrf, "backfill_cancel", {"backfill": pk})
    assert twice.status_code == 409


async def test_a_missed_deadline_shows_on_the_run_dag_and_dags_pages(
    ui: httpx.AsyncClient, store: Store
) -> None:
    await login(ui, "viewer")
    late = await store.create_run(
        "daily", "late_one", run_type="scheduled", logical_date=stamp(1), conf={}, tasks=[],
        epoch=None,
    )  # fmt: skip
    await store.create_run(
        "daily", "on_time", run_type="scheduled", logical_date=stamp(2), conf={}, tasks=[],
        epoch=None,
    )  # fmt: skip
    before = (await ui.get("/dags/daily/runs/late_one")).text
    assert "deadline missed" not in before and "due" in before  # the deadline, not yet missed
    missed_at = stamp(1) + 2 * 3600 + 5
    assert await mark_deadline_missed(store, late.pk, missed_at, epoch=None)
    run = (await ui.get("/dags/daily/runs/late_one")).text
    assert (
        "This run missed its deadline" in run and "not finished 2h00m after its logical date" in run
    )
    assert 'datetime="2026-01-01T05:00:00Z"' in run  # due: logical date + 2h
    assert 'datetime="2026-01-01T05:00:05Z"' in run  # found late
    assert "Run timeout" in run and "<code>1h00m</code> after its start" in run
    assert "deadline missed" in run
    assert "deadline missed" not in (await ui.get("/dags/daily/runs/on_time")).text
    dag = (await ui.get("/dags/daily")).text
    assert 'class="sq s-queued late"' in dag and "late_one (queued, missed its deadline)" in dag
    assert "1 of these runs missed the deadline" in dag
    picked = (await ui.get("/dags/daily?run=late_one")).text
    assert picked.count("deadline missed") > dag.count("deadline missed")
    dags = (await ui.get("/")).text
    assert "late_one: queued, missed its deadline" in dags
    assert "1 of the last 2 missed the deadline" in dags
