"""The role matrix, for every endpoint: no token or an unknown one -> 401 with
``WWW-Authenticate: Bearer``, a weaker role -> 403, and in both cases nothing in the
store changes; the weakest allowed role gets through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from leoflow.store import Store
from tests.integration.api.conftest import DAG_YAML, auth_header
from tests.integration.api.seed import seed, snapshot

ROLES = ("viewer", "operator", "admin")
OPEN = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}
R = "/api/v1/dags/etl/runs"


@dataclass(frozen=True)
class Call:
    method: str
    route: str  # the route template, to check every route is covered
    url: str
    role: str
    ok: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


CALLS = [
    Call("GET", "/api/v1/dags", "/api/v1/dags", "viewer", 200),
    Call(
        "POST",
        "/api/v1/dags",
        "/api/v1/dags",
        "admin",
        200,
        {"content": DAG_YAML},
        {"Content-Type": "application/yaml"},
    ),
    Call("GET", "/api/v1/dags/{dag_id}", "/api/v1/dags/etl", "viewer", 200),
    # Admin reaches the handler, which refuses: the seeded run q is still queued.
    Call("DELETE", "/api/v1/dags/{dag_id}", "/api/v1/dags/etl", "admin", 409),
    Call("POST", "/api/v1/dags/{dag_id}/pause", "/api/v1/dags/etl/pause", "operator", 200),
    Call("POST", "/api/v1/dags/{dag_id}/unpause", "/api/v1/dags/etl/unpause", "operator", 200),
    Call("GET", "/api/v1/runs", "/api/v1/runs", "viewer", 200),
    Call("GET", "/api/v1/dags/{dag_id}/runs", R, "viewer", 200),
    Call("POST", "/api/v1/dags/{dag_id}/runs", R, "operator", 201, {"json": {"conf": {"a": 1}}}),
    Call("GET", "/api/v1/dags/{dag_id}/runs/{run_id}", f"{R}/r", "viewer", 200),
    Call("POST", "/api/v1/dags/{dag_id}/runs/{run_id}/cancel", f"{R}/q/cancel", "operator", 200),
    Call("GET", "/api/v1/dags/{dag_id}/runs/{run_id}/tasks", f"{R}/r/tasks", "viewer", 200),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}",
        f"{R}/r/tasks/extract",
        "viewer",
        200,
    ),
    Call(
        "POST",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/clear",
        f"{R}/r/tasks/transform/clear?downstream=true",
        "operator",
        200,
    ),
    Call(
        "POST",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/mark",
        f"{R}/r/tasks/transform/mark?state=success&downstream=true",
        "operator",
        200,
    ),
    Call(
        "POST",
        "/api/v1/dags/{dag_id}/runs/{run_id}/clear_failed",
        f"{R}/r/clear_failed",
        "operator",
        200,
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/why",
        f"{R}/q/tasks/extract/why",
        "viewer",
        200,
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/tries",
        f"{R}/r/tasks/extract/tries",
        "viewer",
        200,
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs/{try_number}",
        f"{R}/r/tasks/extract/logs/1",
        "viewer",
        200,
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs/{try_number}/search",
        f"{R}/r/tasks/extract/logs/1/search?q=world",
        "viewer",
        200,
    ),
    Call("GET", "/api/v1/pools", "/api/v1/pools", "viewer", 200),
    Call("GET", "/api/v1/pools/{name}", "/api/v1/pools/gpu", "viewer", 200),
    Call(
        "POST", "/api/v1/pools", "/api/v1/pools", "admin", 201, {"json": {"name": "x", "slots": 1}}
    ),
    Call(
        "PATCH", "/api/v1/pools/{name}", "/api/v1/pools/gpu", "admin", 200, {"json": {"slots": 5}}
    ),
    Call("DELETE", "/api/v1/pools/{name}", "/api/v1/pools/gpu", "admin", 204),
    # etl has no schedule and no backfill exists: past the role check, each is refused
    # for what it asks (the working paths: test_backfills_api.py).
    Call("GET", "/api/v1/dags/{dag_id}/backfills", "/api/v1/dags/etl/backfills", "viewer", 200),
    Call(
        "POST",
        "/api/v1/dags/{dag_id}/backfills",
        "/api/v1/dags/etl/backfills",
        "operator",
        422,
        {"json": {"from": "2026-01-01", "to": "2026-01-02"}},
    ),
    Call("GET", "/api/v1/backfills/{pk}", "/api/v1/backfills/9", "viewer", 404),
    # No DAG names an asset here: past the role check, the one-asset calls are refused.
    Call("GET", "/api/v1/assets", "/api/v1/assets", "viewer", 200),
    Call("GET", "/api/v1/assets/one", "/api/v1/assets/one?uri=orders", "viewer", 404),
    Call("GET", "/api/v1/assets/events", "/api/v1/assets/events", "viewer", 200),
    Call(
        "POST",
        "/api/v1/assets/events",
        "/api/v1/assets/events",
        "operator",
        404,
        {"json": {"uri": "orders"}},
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/runs/{run_id}/asset-events",
        f"{R}/r/asset-events",
        "viewer",
        200,
    ),
    Call(
        "GET",
        "/api/v1/dags/{dag_id}/asset-waiting",
        "/api/v1/dags/etl/asset-waiting",
        "viewer",
        200,
    ),
    Call("POST", "/api/v1/backfills/{pk}/cancel", "/api/v1/backfills/9/cancel", "operator", 404),
]


def test_every_route_is_in_the_matrix(app: FastAPI) -> None:
    # The OpenAPI document lists every route but /metrics (kept out of it).
    routes = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    covered = {(c.method, c.route) for c in CALLS}
    assert routes - OPEN == covered


@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c.method} {c.route}")
async def test_role_matrix(call: Call, client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    before = await snapshot(store)

    refusals: list[tuple[dict[str, str], int]] = [
        ({}, 401),
        ({"Authorization": "Bearer not-a-token"}, 401),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401),
    ]
    weaker = ROLES[: ROLES.index(call.role)]
    refusals += [(auth_header(role), 403) for role in weaker]
    for headers, status in refusals:
        response = await client.request(
            call.method, call.url, headers={**call.headers, **headers}, **call.kwargs
        )
        assert response.status_code == status, (headers, response.text)
        assert "detail" in response.json()
        if status == 401:
            assert response.headers["WWW-Authenticate"] == "Bearer"
        else:
            assert call.role in response.json()["detail"]
        assert await snapshot(store) == before, headers

    for role in ROLES[ROLES.index(call.role) :][::-1]:
        if role != call.role and call.method != "GET":
            continue  # a write is made once, by the weakest role allowed
        response = await client.request(
            call.method, call.url, headers={**call.headers, **auth_header(role)}, **call.kwargs
        )
        assert response.status_code == call.ok, (role, response.text)


async def test_open_endpoints_need_no_token(client: httpx.AsyncClient) -> None:
    for method, path in sorted(OPEN):
        assert (await client.request(method, path)).status_code == 200, path
