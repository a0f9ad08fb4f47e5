"""Every endpoint's happy path, and its 404/409/422 answers."""

from __future__ import annotations

import httpx

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from tests.integration.api.conftest import DAG_YAML, auth_header, put_dag

ADMIN = auth_header("admin")
ADMIN_YAML = {**ADMIN, "Content-Type": "application/yaml"}
OPERATOR = auth_header("operator")
VIEWER = auth_header("viewer")


async def test_health_and_ready_are_open(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready"}


async def test_readyz_is_503_when_the_store_is_gone(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.close()
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert "store unreachable" in response.json()["detail"]


async def test_metrics_are_open_and_count_requests_by_route(client: httpx.AsyncClient) -> None:
    await client.get("/api/v1/runs", headers=VIEWER)
    text = (await client.get("/metrics")).text
    assert 'leoflow_api_requests_total{method="GET",route="/api/v1/runs",status="200"}' in text


async def test_openapi_document_lists_the_endpoints(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    paths = doc["paths"]
    for path in (
        "/api/v1/dags",
        "/api/v1/dags/{dag_id}",
        "/api/v1/runs",
        "/api/v1/dags/{dag_id}/runs/{run_id}/cancel",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/why",
        "/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/logs/{try_number}",
        "/api/v1/pools/{name}",
    ):
        assert path in paths
    assert "application/yaml" in paths["/api/v1/dags"]["post"]["requestBody"]["content"]


# ---------------------------------------------------------------------- DAGs


async def test_apply_list_get_pause_unpause(
    client: httpx.AsyncClient, store: Store, notified: list[int]
) -> None:
    response = await client.post(
        "/api/v1/dags?name=etl.yaml",
        content=DAG_YAML,
        headers={**ADMIN, "Content-Type": "application/yaml"},
    )
    assert response.status_code == 201, response.text
    assert response.json() == {
        "dag_id": "etl",
        "created": True,
        "changed": True,
        "fileloc": "api:etl",
        "previous_fileloc": None,
        "task_count": 3,
    }
    assert notified
    row = await store.get_dag("etl")
    assert row is not None and row.source == DAG_YAML and row.fileloc == "api:etl"

    again = await client.post("/api/v1/dags", content=DAG_YAML, headers=ADMIN_YAML)
    assert again.status_code == 200 and again.json()["changed"] is False

    await store.set_dag_error("/dags/broken.yaml", "broken.yaml: tasks: required field")
    listing = (await client.get("/api/v1/dags", headers=VIEWER)).json()
    assert [d["dag_id"] for d in listing["dags"]] == ["etl"]
    assert listing["dags"][0]["task_count"] == 3
    assert listing["dags"][0]["max_active_tasks"] == 4
    assert listing["import_errors"] == [
        {"fileloc": "/dags/broken.yaml", "error": "broken.yaml: tasks: required field"}
    ]

    detail = (await client.get("/api/v1/dags/etl", headers=VIEWER)).json()
    assert detail["source"] == DAG_YAML
    assert [t["task_id"] for t in detail["tasks"]] == ["extract", "transform", "load"]
    assert detail["tasks"][1]["depends_on"] == ["extract"]
    assert detail["tasks"][1]["retry_delay"] == 30.0

    paused = await client.post("/api/v1/dags/etl/pause", headers=OPERATOR)
    assert paused.json()["paused"] is True
    assert (await store.get_dag("etl")).paused  # type: ignore[union-attr]
    unpaused = await client.post("/api/v1/dags/etl/unpause", headers=OPERATOR)
    assert unpaused.json()["paused"] is False


async def test_apply_invalid_dag_is_422_with_every_problem_and_stores_nothing(
    client: httpx.AsyncClient, store: Store
) -> None:
    bad = """\
dag_id: bad
tasks:
  a:
    command: echo a
    pool: nowhere
    retries: -1
  b:
    depends_on: [ghost]
    command: echo b
    colour: red
"""
    response = await client.post("/api/v1/dags?name=bad.yaml", content=bad, headers=ADMIN_YAML)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail["file"] == "<api>/bad.yaml"
    problems = {(p["field"], p["line"]) for p in detail["problems"]}
    # Pydantic's problems come first; the semantic ones (pool, upstream) need a valid model.
    assert ("tasks.a.retries", 6) in problems
    assert ("tasks.b.colour", 10) in problems
    assert all(p["file"] == "<api>/bad.yaml" and p["message"] for p in detail["problems"])
    assert await store.get_dag("bad") is None
    assert await store.list_dag_errors() == []


async def test_apply_semantic_problems_name_the_pool_and_the_upstream(
    client: httpx.AsyncClient, store: Store
) -> None:
    bad = (
        "dag_id: bad\ntasks:\n  a:\n    command: x\n    pool: nowhere\n"
        "  b:\n    depends_on: [ghost]\n    command: y\n"
    )
    response = await client.post("/api/v1/dags", content=bad, headers=ADMIN_YAML)
    assert response.status_code == 422
    by_field = {p["field"]: p for p in response.json()["detail"]["problems"]}
    assert "unknown pool 'nowhere'" in by_field["tasks.a.pool"]["message"]
    assert "warehouse" in by_field["tasks.a.pool"]["message"]  # a settings pool is known
    assert by_field["tasks.a.pool"]["line"] == 5
    assert "unknown task 'ghost'" in by_field["tasks.b.depends_on.0"]["message"]
    assert await store.get_dag("bad") is None


async def test_apply_knows_pools_created_through_the_api(client: httpx.AsyncClient) -> None:
    text = "dag_id: p\ntasks:\n  a:\n    command: x\n    pool: gpu\n"
    assert (await client.post("/api/v1/dags", content=text, headers=ADMIN_YAML)).status_code == 422
    created = await client.post("/api/v1/pools", json={"name": "gpu", "slots": 1}, headers=ADMIN)
    assert created.status_code == 201
    assert (await client.post("/api/v1/dags", content=text, headers=ADMIN_YAML)).status_code == 201


async def test_apply_checks_passthrough_on_kubernetes(
    store: Store, tmp_path: object, settings: object
) -> None:
    from pathlib import Path

    from leoflow.api.app import create_app
    from tests.integration.api.conftest import make_auth, make_settings

    kube = make_settings(Path(str(tmp_path)), executor="kubernetes")
    app = create_app(store, kube, auth=make_auth())
    text = (
        "dag_id: k\ntasks:\n  a:\n    command: x\n    execution:\n"
        "      node_selector: {pool: big}\n"
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as c:
        response = await c.post("/api/v1/dags", content=text, headers=ADMIN_YAML)
    assert response.status_code == 422
    (problem,) = response.json()["detail"]["problems"]
    assert problem["field"] == "tasks.a.execution.node_selector"
    assert "LEOFLOW_TASK_POD_PASSTHROUGH" in problem["message"]


async def test_apply_rejects_bad_yaml_and_non_utf8(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/dags", content="a: [1,\n", headers=ADMIN_YAML)
    assert response.status_code == 422
    assert "invalid YAML" in response.json()["detail"]["problems"][0]["message"]
    response = await client.post("/api/v1/dags", content=b"\xff\xfe", headers=ADMIN_YAML)
    assert response.status_code == 422
    assert "UTF-8" in response.json()["detail"]["problems"][0]["message"]


async def test_unknown_dag_is_404(client: httpx.AsyncClient) -> None:
    for method, path, headers in (
        ("GET", "/api/v1/dags/nope", VIEWER),
        ("POST", "/api/v1/dags/nope/pause", OPERATOR),
        ("POST", "/api/v1/dags/nope/unpause", OPERATOR),
        ("POST", "/api/v1/dags/nope/runs", OPERATOR),
    ):
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 404, (method, path)
        assert "nope" in response.json()["detail"]


# ---------------------------------------------------------------------- runs


async def test_trigger_get_list_cancel(
    client: httpx.AsyncClient, store: Store, notified: list[int]
) -> None:
    await put_dag(store)
    response = await client.post(
        "/api/v1/dags/etl/runs", json={"conf": {"day": "2024-01-01"}}, headers=OPERATOR
    )
    assert response.status_code == 201, response.text
    run = response.json()
    assert run["state"] == "queued" and run["run_type"] == "manual"
    assert run["run_id"].startswith("manual__")
    assert run["conf"] == {"day": "2024-01-01"}
    assert response.headers["Location"] == f"/api/v1/dags/etl/runs/{run['run_id']}"
    assert notified
    tis = await store.list_task_instances(run_pk=run["pk"])
    assert sorted(t.task_id for t in tis) == ["extract", "load", "transform"]
    transform = next(t for t in tis if t.task_id == "transform")
    assert (transform.pool, transform.max_tries) == ("warehouse", 3)

    named = await client.post("/api/v1/dags/etl/runs", json={"run_id": "r1"}, headers=OPERATOR)
    assert named.status_code == 201 and named.json()["run_id"] == "r1"
    dup = await client.post("/api/v1/dags/etl/runs", json={"run_id": "r1"}, headers=OPERATOR)
    assert dup.status_code == 409 and "already exists" in dup.json()["detail"]

    got = (await client.get("/api/v1/dags/etl/runs/r1", headers=VIEWER)).json()
    assert got["run_id"] == "r1" and got["state"] == "queued"
    listing = (await client.get("/api/v1/runs?dag_id=etl", headers=VIEWER)).json()
    assert [r["run_id"] for r in listing["runs"]] == ["r1", run["run_id"]]
    assert listing["next_cursor"] is None
    nested = (await client.get("/api/v1/dags/etl/runs?state=queued", headers=VIEWER)).json()
    assert len(nested["runs"]) == 2

    cancelled = await client.post("/api/v1/dags/etl/runs/r1/cancel", headers=OPERATOR)
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "failed"
    assert cancelled.json()["message"] == "cancelled by operator"
    row = await store.find_run("etl", "r1")
    assert row is not None and row.state is RunState.FAILED and row.ended_at is not None
    again = await client.post("/api/v1/dags/etl/runs/r1/cancel", headers=OPERATOR)
    assert again.status_code == 409 and "already failed" in again.json()["detail"]


async def test_cancel_a_running_run(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    run = (await client.post("/api/v1/dags/etl/runs", headers=OPERATOR)).json()
    assert await store.transition_run(run["pk"], RunState.QUEUED, RunState.RUNNING, epoch=None)
    response = await client.post(f"/api/v1/dags/etl/runs/{run['run_id']}/cancel", headers=OPERATOR)
    assert response.json()["state"] == "failed"


async def test_trigger_refuses_a_paused_dag(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store, paused=True)
    response = await client.post("/api/v1/dags/etl/runs", headers=OPERATOR)
    assert response.status_code == 409 and "paused" in response.json()["detail"]
    assert await store.list_runs() == []


async def test_trigger_validates_its_body(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    for body in ({"conf": [1, 2]}, {"run_id": "a/b"}, {"colour": "red"}):
        response = await client.post("/api/v1/dags/etl/runs", json=body, headers=OPERATOR)
        assert response.status_code == 422, body
    assert await store.list_runs() == []


async def test_unknown_run_is_404(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    for method, path, headers in (
        ("GET", "/api/v1/dags/etl/runs/nope", VIEWER),
        ("POST", "/api/v1/dags/etl/runs/nope/cancel", OPERATOR),
        ("GET", "/api/v1/dags/etl/runs/nope/tasks", VIEWER),
        ("GET", "/api/v1/dags/etl/runs/nope/tasks/extract", VIEWER),
        ("GET", "/api/v1/dags/etl/runs/nope/tasks/extract/why", VIEWER),
        ("POST", "/api/v1/dags/etl/runs/nope/tasks/extract/clear", OPERATOR),
        ("GET", "/api/v1/dags/etl/runs/nope/tasks/extract/logs/1", OPERATOR),
    ):
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 404, (method, path)


# ----------------------------------------------------------- task instances


async def _finished_run(client: httpx.AsyncClient, store: Store, outcome: TaskState) -> int:
    """A run of etl that ran extract (success), transform (``outcome``), load (upstream_failed)."""
    await put_dag(store)
    run = (
        await client.post("/api/v1/dags/etl/runs", json={"run_id": "r"}, headers=OPERATOR)
    ).json()
    assert await store.transition_run(run["pk"], RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run["pk"])}
    path = {
        "extract": [TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCESS],
        "transform": [TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, outcome],
        "load": [TaskState.UPSTREAM_FAILED],
    }
    for task_id, states in path.items():
        current = TaskState.NONE
        for new in states:
            fields = {"try_number": 1} if new is TaskState.QUEUED else {}
            assert await store.transition_task(tis[task_id].pk, current, new, epoch=None, **fields)
            current = new
    assert await store.transition_run(run["pk"], RunState.RUNNING, RunState.FAILED, epoch=None)
    return int(run["pk"])


async def test_list_and_get_task_instances(client: httpx.AsyncClient, store: Store) -> None:
    await _finished_run(client, store, TaskState.FAILED)
    page = (await client.get("/api/v1/dags/etl/runs/r/tasks", headers=VIEWER)).json()
    states = {t["task_id"]: t["state"] for t in page["task_instances"]}
    assert states == {"extract": "success", "transform": "failed", "load": "upstream_failed"}
    assert page["next_cursor"] is None
    first = (await client.get("/api/v1/dags/etl/runs/r/tasks?limit=2", headers=VIEWER)).json()
    assert len(first["task_instances"]) == 2 and first["next_cursor"] is not None
    rest = (
        await client.get(
            f"/api/v1/dags/etl/runs/r/tasks?limit=2&after={first['next_cursor']}", headers=VIEWER
        )
    ).json()
    assert len(rest["task_instances"]) == 1 and rest["next_cursor"] is None
    one = (await client.get("/api/v1/dags/etl/runs/r/tasks/transform", headers=VIEWER)).json()
    assert one["state"] == "failed" and one["try_number"] == 1 and one["pool"] == "warehouse"
    missing = await client.get("/api/v1/dags/etl/runs/r/tasks/ghost", headers=VIEWER)
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]


async def test_clear_with_downstream_reruns_the_run(
    client: httpx.AsyncClient, store: Store, notified: list[int]
) -> None:
    run_pk = await _finished_run(client, store, TaskState.FAILED)
    notified.clear()
    response = await client.post(
        "/api/v1/dags/etl/runs/r/tasks/transform/clear?downstream=true", headers=OPERATOR
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["cleared"] == ["load", "transform"]
    assert body["run"]["state"] == "running"
    assert "cleared by operator" in body["run"]["message"]
    assert notified
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run_pk)}
    assert tis["extract"].state is TaskState.SUCCESS
    assert tis["transform"].state is TaskState.NONE
    assert tis["transform"].try_number == 1 and tis["transform"].max_tries == 1 + 3
    assert tis["transform"].ended_at is None and tis["transform"].exit_code is None
    assert tis["load"].state is TaskState.NONE
    run = await store.get_run(run_pk)
    assert run is not None and run.state is RunState.RUNNING and run.ended_at is None


async def test_clear_without_downstream_clears_one(client: httpx.AsyncClient, store: Store) -> None:
    run_pk = await _finished_run(client, store, TaskState.FAILED)
    response = await client.post("/api/v1/dags/etl/runs/r/tasks/extract/clear", headers=OPERATOR)
    assert response.json()["cleared"] == ["extract"]
    tis = {t.task_id: t.state for t in await store.list_task_instances(run_pk=run_pk)}
    assert tis == {
        "extract": TaskState.NONE,
        "transform": TaskState.FAILED,
        "load": TaskState.UPSTREAM_FAILED,
    }


async def test_clear_needs_a_finished_run(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    run = (
        await client.post("/api/v1/dags/etl/runs", json={"run_id": "q"}, headers=OPERATOR)
    ).json()
    response = await client.post("/api/v1/dags/etl/runs/q/tasks/extract/clear", headers=OPERATOR)
    assert response.status_code == 409 and "queued" in response.json()["detail"]
    states = {t.state for t in await store.list_task_instances(run_pk=run["pk"])}
    assert states == {TaskState.NONE}


# ---------------------------------------------------------------------- pools


async def test_pools_create_resize_delete_with_occupancy(
    client: httpx.AsyncClient, store: Store
) -> None:
    created = await client.post(
        "/api/v1/pools", json={"name": "gpu", "slots": 4, "description": "A100s"}, headers=ADMIN
    )
    assert created.status_code == 201
    assert created.json() == {
        "name": "gpu",
        "slots": 4,
        "description": "A100s",
        "occupied": 0,
        "queued": 0,
        "running": 0,
        "source": "store",
    }
    dup = await client.post("/api/v1/pools", json={"name": "gpu", "slots": 1}, headers=ADMIN)
    assert dup.status_code == 409

    await _finished_run(client, store, TaskState.FAILED)  # nothing held any more
    await client.post("/api/v1/dags/etl/runs", json={"run_id": "busy"}, headers=OPERATOR)
    busy = await store.find_run("etl", "busy")
    assert busy is not None
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=busy.pk)}
    t = tis["transform"]
    for old, new in (
        (TaskState.NONE, TaskState.SCHEDULED),
        (TaskState.SCHEDULED, TaskState.QUEUED),
    ):
        assert await store.transition_task(t.pk, old, new, epoch=None)

    listing = (await client.get("/api/v1/pools", headers=VIEWER)).json()["pools"]
    by_name = {p["name"]: p for p in listing}
    assert by_name["default_pool"]["source"] == "default"
    assert by_name["default_pool"]["slots"] == 128
    assert by_name["warehouse"] == {
        "name": "warehouse",
        "slots": 2,
        "description": "",
        "occupied": 1,
        "queued": 1,
        "running": 0,
        "source": "settings",
    }

    resized = await client.patch("/api/v1/pools/gpu", json={"slots": 8}, headers=ADMIN)
    assert resized.json()["slots"] == 8 and resized.json()["description"] == "A100s"
    default = await client.patch("/api/v1/pools/default_pool", json={"slots": 3}, headers=ADMIN)
    assert default.json() == {**by_name["default_pool"], "slots": 3, "source": "store"}
    assert (await client.get("/api/v1/pools/gpu", headers=VIEWER)).json()["slots"] == 8

    assert (await client.delete("/api/v1/pools/gpu", headers=ADMIN)).status_code == 204
    assert "gpu" not in {p.name for p in await store.list_pools()}
    assert (await client.delete("/api/v1/pools/gpu", headers=ADMIN)).status_code == 404
    assert (await client.patch("/api/v1/pools/gpu", json={}, headers=ADMIN)).status_code == 404
    assert (await client.delete("/api/v1/pools/default_pool", headers=ADMIN)).status_code == 409
    assert (await client.delete("/api/v1/pools/warehouse", headers=ADMIN)).status_code == 409


async def test_a_pool_in_use_by_a_dag_is_not_deleted(
    client: httpx.AsyncClient, store: Store
) -> None:
    await client.post("/api/v1/pools", json={"name": "gpu", "slots": 1}, headers=ADMIN)
    text = "dag_id: g\ntasks:\n  a:\n    command: x\n    pool: gpu\n"
    assert (await client.post("/api/v1/dags", content=text, headers=ADMIN_YAML)).status_code == 201
    response = await client.delete("/api/v1/pools/gpu", headers=ADMIN)
    assert response.status_code == 409 and "g" in response.json()["detail"]
    assert "gpu" in {p.name for p in await store.list_pools()}


async def test_pool_bodies_are_validated(client: httpx.AsyncClient, store: Store) -> None:
    for body in ({"name": "x", "slots": -1}, {"name": "a b", "slots": 1}, {"slots": 1}):
        assert (await client.post("/api/v1/pools", json=body, headers=ADMIN)).status_code == 422
    assert await store.list_pools() == []
