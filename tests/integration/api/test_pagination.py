"""Run listing with filters and keyset cursors over many runs, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.states import RunState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings, put_dag
from tests.integration.api.seed import SEEDS

V = auth_header("viewer")
N = 250


@pytest.fixture
async def api(any_store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(any_store, make_settings(tmp_path), auth=make_auth())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        yield client


async def _runs(store: Store) -> list[tuple[str, str]]:
    await put_dag(store)
    await put_dag(store, "dag_id: other\ntasks:\n  a: {command: x}\n")
    made = []
    for i in range(N):
        dag_id = "etl" if i % 5 else "other"
        row = await store.create_run(
            dag_id, f"run{i:04d}", run_type="manual", logical_date=None, conf={"i": i},
            tasks=SEEDS[:1], epoch=None,
        )  # fmt: skip
        if i % 3 == 0:
            await store.transition_run(row.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
        made.append((dag_id, row.run_id))
    return made


async def _walk(client: httpx.AsyncClient, path: str, **params: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        query = {**params, **({"before": cursor} if cursor is not None else {})}
        response = await client.get(path, params=query, headers=V)
        assert response.status_code == 200, response.text
        page = response.json()
        pages += 1
        assert len(page["runs"]) <= int(params.get("limit", 100))
        seen += page["runs"]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
        assert cursor == page["runs"][-1]["pk"]
        assert pages < 100


async def test_pages_cover_every_run_once_newest_first(
    api: httpx.AsyncClient, any_store: Store
) -> None:
    made = await _runs(any_store)
    seen = await _walk(api, "/api/v1/runs", limit=37)
    assert [r["run_id"] for r in seen] == [run_id for _, run_id in reversed(made)]
    pks = [r["pk"] for r in seen]
    assert pks == sorted(pks, reverse=True)


async def test_filters_combine_with_cursors(api: httpx.AsyncClient, any_store: Store) -> None:
    made = await _runs(any_store)
    running_etl = [
        run_id for i, (dag_id, run_id) in enumerate(made) if dag_id == "etl" and i % 3 == 0
    ]
    seen = await _walk(api, "/api/v1/runs", dag_id="etl", state="running", limit=10)
    assert [r["run_id"] for r in seen] == running_etl[::-1]
    assert {(r["dag_id"], r["state"]) for r in seen} == {("etl", "running")}
    nested = await _walk(api, "/api/v1/dags/other/runs", limit=20)
    assert len(nested) == N // 5
    both = await _walk(api, "/api/v1/runs", state=["queued", "running"], limit=100)
    assert len(both) == N


async def test_an_exact_last_page_has_no_cursor(api: httpx.AsyncClient, any_store: Store) -> None:
    await _runs(any_store)
    page = (await api.get("/api/v1/runs", params={"limit": N}, headers=V)).json()
    assert len(page["runs"]) == N and page["next_cursor"] is None
    page = (await api.get("/api/v1/runs", params={"limit": N - 1}, headers=V)).json()
    assert page["next_cursor"] == page["runs"][-1]["pk"]


async def test_bad_pagination_parameters_are_422(api: httpx.AsyncClient, any_store: Store) -> None:
    for params in ({"limit": 0}, {"limit": 1001}, {"before": -1}, {"state": "sleeping"}):
        response = await api.get("/api/v1/runs", params=params, headers=V)
        assert response.status_code == 422, params
