"""The assets API: listing with producers and consumers, and external events posted
in (operator or above, idempotent, 404 for an asset no DAG names, nothing half-made)."""

from __future__ import annotations

import httpx

from leoflow.store import Store
from tests.integration.api.conftest import auth_header, put_dag

PRODUCER = """\
dag_id: land
tasks:
  orders:
    command: "true"
    produces: [DuckDB://WH/main.orders]
    consumes: [s3://raw/orders]
"""
CONSUMER = """\
dag_id: marts
schedule: {assets: [duckdb://wh/main.orders, customers]}
tasks:
  build:
    command: "true"
"""
EVENTS = "/api/v1/assets/events"


async def test_assets_list_producers_consumers_schedules_and_last_event(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, PRODUCER)
    await put_dag(store, CONSUMER)
    posted = await client.post(
        EVENTS,
        json={"uri": "DUCKDB://wh/main.orders", "extra": {"rows": 5}},
        headers=auth_header("operator"),
    )
    assert posted.status_code == 201, posted.text
    assert posted.json()["event"]["uri"] == "duckdb://wh/main.orders"
    listed = await client.get("/api/v1/assets", headers=auth_header("viewer"))
    assert listed.status_code == 200
    by_uri = {a["uri"]: a for a in listed.json()["assets"]}
    assert sorted(by_uri) == ["customers", "duckdb://wh/main.orders", "s3://raw/orders"]
    orders = by_uri["duckdb://wh/main.orders"]
    assert orders["producers"] == [{"dag_id": "land", "task_id": "orders"}]
    assert orders["scheduled_dags"] == ["marts"]
    assert orders["last_event"]["extra"] == {"rows": 5}
    assert orders["last_event"]["created_by"] == "operator"
    assert by_uri["customers"]["last_event"] is None
    assert by_uri["s3://raw/orders"]["consumers"] == [{"dag_id": "land", "task_id": "orders"}]
    one = await client.get(
        "/api/v1/assets/one",
        params={"uri": "duckdb://WH/main.orders"},
        headers=auth_header("viewer"),
    )
    assert one.status_code == 200 and [e["extra"] for e in one.json()["events"]] == [{"rows": 5}]


async def test_posting_events_needs_operator_and_is_idempotent_by_key(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, CONSUMER)
    body = {"uri": "customers", "idempotency_key": "load-2026-12-07"}
    refused = await client.post(EVENTS, json=body, headers=auth_header("viewer"))
    assert refused.status_code == 403
    first = await client.post(EVENTS, json=body, headers=auth_header("operator"))
    again = await client.post(EVENTS, json=body, headers=auth_header("admin"))
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["event"]["id"] == again.json()["event"]["id"]
    assert again.json()["created"] is False
    other = await client.post(
        EVENTS,
        json={**body, "uri": "duckdb://wh/main.orders"},
        headers=auth_header("operator"),
    )
    assert other.status_code == 409
    assert len(await store.list_asset_events()) == 1


async def test_bad_events_are_refused_saying_why_and_nothing_is_recorded(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, CONSUMER)
    cases = [
        ({"uri": "nobody_names_this"}, 404, "no DAG produces, consumes or is scheduled"),
        ({"uri": "postgres://u:pw@h/db"}, 422, "credentials"),
        ({"uri": ""}, 422, "empty"),
        ({"uri": "customers", "extra": {"blob": "x" * 17000}}, 422, "the limit is 16384"),
        ({"uri": "customers", "extra": [1, 2]}, 422, "JSON object"),
        ({"uri": "customers", "bogus": 1}, 422, "unknown field"),
        ({"extra": {}}, 422, "uri: required"),
        ({"uri": "customers", "idempotency_key": ""}, 422, "idempotency_key"),
    ]
    for body, status, fragment in cases:
        answer = await client.post(EVENTS, json=body, headers=auth_header("operator"))
        assert answer.status_code == status, (body, answer.text)
        assert fragment in answer.json()["detail"], answer.text
        assert "pw@" not in answer.text
    assert await store.list_asset_events() == []


async def test_a_dag_s_asset_schedule_and_its_run_s_triggering_events_are_in_the_api(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, CONSUMER)
    dag = (await client.get("/api/v1/dags/marts", headers=auth_header("viewer"))).json()
    assert dag["asset_schedule"] == {"all": ["duckdb://wh/main.orders", "customers"]}
    missing = await client.get(
        "/api/v1/dags/marts/runs/nope/asset-events", headers=auth_header("viewer")
    )
    assert missing.status_code == 404
    waiting = await client.get("/api/v1/dags/marts/asset-waiting", headers=auth_header("viewer"))
    assert waiting.json()["waiting"] == (
        "waiting for: duckdb://wh/main.orders (none yet), customers (none yet)"
    )


async def test_an_asset_triggered_run_lists_the_events_that_triggered_it(
    client: httpx.AsyncClient, store: Store
) -> None:
    from leoflow.store.rows import TaskSeed

    await put_dag(store, CONSUMER)
    for uri in ("customers", "duckdb://wh/main.orders"):
        await store.add_asset_event(uri, extra=None, idempotency_key=None, created_by="t")
    state = (await store.asset_trigger_states(["marts"]))["marts"]
    newest = await store.newest_asset_event_pks(["customers", "duckdb://wh/main.orders"])
    run, _ = await store.create_asset_run(
        "marts",
        state=state,
        consumed=newest,
        tasks=[TaskSeed("build", "default_pool", 1, 0, 1)],
        epoch=None,
    )
    answer = await client.get(
        f"/api/v1/dags/marts/runs/{run.run_id}/asset-events", headers=auth_header("viewer")
    )
    assert answer.status_code == 200
    assert [e["uri"] for e in answer.json()["events"]] == ["customers", "duckdb://wh/main.orders"]
    assert run.run_id.startswith("asset__") and run.run_type == "asset"
    waiting = await client.get("/api/v1/dags/marts/asset-waiting", headers=auth_header("viewer"))
    assert waiting.json()["fresh"] == []  # consumed: it waits for new events again
    assert waiting.json()["waiting"].startswith("waiting for: duckdb://wh/main.orders (last event")
