"""The backfill endpoints: dry run, refusals that create nothing, roles, listing."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from leoflow.domain.states import RunState
from leoflow.store import Store
from leoflow.store.backfills import list_backfills
from tests.integration.api.conftest import auth_header, put_dag

DAILY = """\
dag_id: daily
schedule: "0 3 * * *"
max_active_runs: 4
tasks:
  t:
    command: echo
"""
URL = "/api/v1/dags/daily/backfills"


async def _nothing_made(store: Store) -> None:
    assert await list_backfills(store) == []
    assert await store.list_runs() == []


async def test_dry_run_lists_the_points_and_makes_nothing(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, DAILY)
    response = await client.post(
        URL,
        json={"from": "2026-01-01", "to": "2026-01-31T23:59:59", "dry_run": True},
        headers=auth_header("operator"),
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["logical_dates"]) == 31 and body["max_active_runs"] == 4
    assert body["logical_dates"][0] == "2026-01-01T03:00:00Z"
    await _nothing_made(store)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"from": "2026-01-01T04:00:00", "to": "2026-01-02T02:00:00"}, "no cron point"),
        ({"from": "2026-01-01", "to": "2999-01-01"}, "in the future"),
        ({"from": "2026-02-01", "to": "2026-01-01"}, "is after --to"),
    ],
)
async def test_a_bad_range_is_422_and_makes_nothing(
    client: httpx.AsyncClient, store: Store, body: dict[str, str], words: str
) -> None:
    await put_dag(store, DAILY)
    response = await client.post(URL, json=body, headers=auth_header("operator"))
    assert response.status_code == 422 and words in response.json()["detail"]
    await _nothing_made(store)


async def test_refusals_by_dag_role_and_field(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)  # etl: no schedule
    span = {"from": "2026-01-01", "to": "2026-01-02"}
    no_cron = await client.post(
        "/api/v1/dags/etl/backfills", json=span, headers=auth_header("operator")
    )
    assert no_cron.status_code == 422 and "has no schedule" in no_cron.json()["detail"]
    missing = await client.post(
        "/api/v1/dags/nope/backfills", json=span, headers=auth_header("operator")
    )
    assert missing.status_code == 404
    await put_dag(store, DAILY)
    viewer = await client.post(URL, json=span, headers=auth_header("viewer"))
    assert viewer.status_code == 403
    bad = await client.post(
        URL, json={**span, "max_active_runs": 0}, headers=auth_header("operator")
    )
    assert bad.status_code == 422 and "max_active_runs" in bad.text
    await _nothing_made(store)


async def test_created_listed_and_a_second_one_refused(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, DAILY)
    # "to": a day is all of it: 03:00 of the 1st to 03:00 of the 10th, 10 points.
    span = {"from": "2026-01-01", "to": "2026-01-10", "max_active_runs": 2}
    created = await client.post(URL, json=span, headers=auth_header("operator"))
    assert created.status_code == 201
    pk = created.json()["pk"]
    assert created.headers["location"] == f"/api/v1/backfills/{pk}"
    assert created.json()["progress"] == {
        "total": 10, "pending": 10, "queued": 0, "running": 0, "success": 0, "failed": 0,
    }  # fmt: skip
    second = await client.post(URL, json=span, headers=auth_header("operator"))
    assert second.status_code == 409 and str(pk) in second.json()["detail"]
    listed = await client.get(URL, headers=auth_header("viewer"))
    assert [b["pk"] for b in listed.json()] == [pk]
    one = await client.get(f"/api/v1/backfills/{pk}", headers=auth_header("viewer"))
    assert len(one.json()["pending"]) == 10 and one.json()["runs"] == []
    assert (
        await client.get("/api/v1/backfills/999", headers=auth_header("viewer"))
    ).status_code == 404


async def test_points_with_runs_are_skipped_unless_failed_and_reprocessed(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, DAILY)
    for day, end in ((1, RunState.FAILED), (2, RunState.SUCCESS)):
        stamp = datetime(2026, 1, day, 3, tzinfo=UTC).timestamp()
        run = await store.create_run(
            "daily", f"scheduled__{day}", run_type="scheduled", logical_date=stamp, conf={},
            tasks=[], epoch=None,
        )  # fmt: skip
        await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
        await store.transition_run(run.pk, RunState.RUNNING, end, epoch=None)
    span = {"from": "2026-01-01", "to": "2026-01-03T12:00", "dry_run": True}
    plain = (await client.post(URL, json=span, headers=auth_header("operator"))).json()
    assert plain["logical_dates"] == ["2026-01-03T03:00:00Z"]
    assert plain["skipped"] == ["2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z"]
    again = (
        await client.post(
            URL, json={**span, "reprocess_failed": True}, headers=auth_header("operator")
        )
    ).json()
    assert again["logical_dates"] == ["2026-01-01T03:00:00Z", "2026-01-03T03:00:00Z"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"from": "0001-01-01", "to": "2026-01-01"}, "from"),
        ({"from": "0001-01-01T00:00:00+14:00", "to": "2026-01-01"}, "from"),
        ({"from": "1899-12-31T23:59:59", "to": "2026-01-01"}, "from"),
        ({"from": "2026-01-01", "to": "9999-12-31T23:59:59.999999"}, "to"),
        ({"from": "2026-01-01", "to": "9999-12-31T23:00:00-05:00"}, "to"),
    ],
)
async def test_a_date_at_the_edges_of_time_is_a_field_error_not_a_500(
    client: httpx.AsyncClient, store: Store, body: dict[str, str], field: str
) -> None:
    await put_dag(store, DAILY)
    response = await client.post(URL, json=body, headers=auth_header("operator"))
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", field]
    assert "outside the dates Leoflow handles: from 1900-01-01 up to 9999-01-01" in problem["msg"]
    await _nothing_made(store)
