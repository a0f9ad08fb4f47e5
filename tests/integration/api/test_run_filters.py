"""Runs you can find: the API's and the runs pages' filters (state with cancelled
apart from failed, run type, date range), keyset paging, and bad filters."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx

from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header
from tests.integration.api.seed import SEEDS, move
from tests.integration.api.test_web_ui import _login, ui  # noqa: F401

VIEWER = auth_header("viewer")
OPERATOR = auth_header("operator")
DAY = 86_400.0
JAN_1 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


async def _runs(store: Store) -> None:
    """etl: daily scheduled runs 2026-01-01..10 (success), backfill runs on 01-11..12
    (failed), one manual run cancelled, one running manual run."""
    for day in range(12):
        kind = "scheduled" if day < 10 else "backfill"
        run = await store.create_run(
            "etl", f"d{day + 1:02d}", run_type=kind, logical_date=JAN_1 + day * DAY,
            conf={}, tasks=SEEDS, epoch=None,
        )  # fmt: skip
        await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
        end = RunState.SUCCESS if kind == "scheduled" else RunState.FAILED
        await store.transition_run(run.pk, RunState.RUNNING, end, epoch=None)
    for run_id in ("m-cancel", "m-live"):
        await store.create_run(
            "etl", run_id, run_type="manual", logical_date=None, conf={}, tasks=SEEDS, epoch=None
        )


async def _cancel(client: httpx.AsyncClient, store: Store) -> None:
    r = await client.post("/api/v1/dags/etl/runs/m-cancel/cancel", headers=OPERATOR)
    assert r.status_code == 200 and r.json()["cancelled"] is True
    run = await store.find_run("etl", "m-cancel")
    assert run is not None
    (ti,) = [t for t in await store.list_task_instances(run_pk=run.pk) if t.task_id == "load"]
    # As the scheduler ends a cancelled run's task: failed, for reason cancelled.
    await move(store, ti.pk, TaskState.FAILED, reason=EndReason.CANCELLED.value)


def _ids(page: httpx.Response) -> list[str]:
    assert page.status_code == 200, page.text
    return [r["run_id"] for r in page.json()["runs"]]


async def test_api_filters_by_state_cancelled_type_and_dates(
    client: httpx.AsyncClient, store: Store
) -> None:
    from tests.integration.api.conftest import put_dag

    await put_dag(store)
    await _runs(store)
    await _cancel(client, store)
    get = client.get
    url = "/api/v1/dags/etl/runs"
    assert _ids(await get(url, params={"cancelled": "true"}, headers=VIEWER)) == ["m-cancel"]
    failed = await get(url, params={"state": "failed", "cancelled": "false"}, headers=VIEWER)
    assert _ids(failed) == ["d12", "d11"]
    assert not any(r["cancelled"] for r in failed.json()["runs"])
    assert _ids(await get(url, params={"run_type": "backfill"}, headers=VIEWER)) == ["d12", "d11"]
    kinds = {"run_type": ["manual", "backfill"]}
    assert len(_ids(await get(url, params=kinds, headers=VIEWER))) == 4
    dated = {"date_from": "2026-01-03T00:00:00Z", "date_to": "2026-01-05T00:00:00Z"}
    assert _ids(await get("/api/v1/runs", params=dated, headers=VIEWER)) == ["d04", "d03"]
    # Keyset pages: newest first, no run twice, none left out.
    seen, before = [], None
    while True:
        params = {"limit": 5, **({"before": before} if before else {})}
        page = (await get(url, params=params, headers=VIEWER)).json()
        seen += [r["run_id"] for r in page["runs"]]
        before = page["next_cursor"]
        if before is None:
            break
    assert len(seen) == len(set(seen)) == 14 and seen[0] == "m-live"
    for params in ({"run_type": "nightly"}, {"date_from": "yesterday"}, {"cancelled": "maybe"}):
        r = await get(url, params=params, headers=VIEWER)
        assert r.status_code == 422, params


async def test_runs_pages_filter_page_and_show_cancelled(
    ui: httpx.AsyncClient,  # noqa: F811
    store: Store,
) -> None:
    await _runs(store)
    await _login(ui, "operator")
    csrf = await _login(ui, "operator")
    r = await ui.post(
        "/ui/actions/cancel",
        json={"dag_id": "etl", "run_id": "m-cancel"},
        headers={
            "Origin": "http://localhost",
            "Content-Type": "application/json",
            "X-CSRF-Token": csrf,
        },
    )
    assert r.status_code == 200, r.text
    await _login(ui, "viewer")

    def rows(html: str) -> list[tuple[str, str]]:
        return re.findall(r'<tr data-run="([^"]+)" data-state="([^"]+)">', html)

    page = (await ui.get("/dags/etl/runs?state=cancelled")).text
    assert rows(page) == [("m-cancel", "cancelled")]
    page = (await ui.get("/dags/etl/runs?state=failed")).text
    assert [r for r, _ in rows(page)] == ["d12", "d11", "r"]  # r: seed's failed run
    page = (await ui.get("/runs?type=scheduled&from=2026-01-02&to=2026-01-03")).text
    assert rows(page) == [("d03", "success"), ("d02", "success")]
    # Jump to date: the newest runs dated on or before it.
    page = (await ui.get("/dags/etl/runs?type=scheduled&at=2026-01-04")).text
    assert [r for r, _ in rows(page)][:2] == ["d04", "d03"]
    run_page = (await ui.get("/dags/etl/runs/m-cancel")).text
    assert re.search(r'<h1 class="run-title">m-cancel <span class="badge s-cancelled">', run_page)
    grid = (await ui.get("/dags/etl")).text
    assert 'class="sq s-cancelled"' in grid and 'class="run-facts"' in grid
    # Bad filters: said in the page, left out; never a 500.
    for query, words in (
        ("state=bogus", "&#39;state&#39;: expected one of"),
        ("from=2026-13-45", "&#39;from&#39;: expected a date as YYYY-MM-DD"),
        ("to=2026-01-01&from=2026-02-01", "&#39;to&#39; is before &#39;from&#39;"),
        ("before=-3", "&#39;before&#39;: expected a page cursor"),
        ("type=%E2%98%83", "&#39;type&#39;: expected one of"),
    ):
        answer = await ui.get(f"/runs?{query}")
        assert answer.status_code == 200 and words in answer.text, query
    assert (await ui.get("/dags/nope/runs")).status_code == 404


async def test_a_cancelled_task_reads_cancelled(
    ui: httpx.AsyncClient,  # noqa: F811
    store: Store,
) -> None:
    run = await store.find_run("etl", "q")
    assert run is not None
    (ti,) = [t for t in await store.list_task_instances(run_pk=run.pk) if t.task_id == "load"]
    await move(store, ti.pk, TaskState.FAILED, reason=EndReason.CANCELLED.value)
    await _login(ui, "viewer")
    page = (await ui.get("/dags/etl/runs/q/tasks/load")).text
    assert re.search(r"<h1>load <span class=\"badge s-cancelled\">", page)
    run_page = (await ui.get("/dags/etl/runs/q")).text
    assert "s-cancelled" in run_page
    # The graph's node and the grid's square of run q say cancelled too.
    dag_page = (await ui.get("/dags/etl?run=q")).text
    assert re.search(
        r'<g class="node s-cancelled" data-task="load" data-state="cancelled"', dag_page
    )
    assert 'class="sq s-cancelled" href="/dags/etl/runs/q/tasks/load"' in dag_page
    assert 'class="sq s-failed" href="/dags/etl/runs/r/tasks/transform"' in dag_page
