"""The mark and clear-failed endpoints: roles, the finished run's writes, the running
run's recorded requests, and the refusals that name what happened."""

from __future__ import annotations

import httpx

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from leoflow.store.clears import pending_clears
from tests.integration.api.conftest import auth_header
from tests.integration.api.seed import seed

MARK = "/api/v1/dags/etl/runs/r/tasks/transform/mark"
CLEAR_FAILED = "/api/v1/dags/etl/runs/r/clear_failed"


async def _states(store: Store, run_id: str) -> dict[str, TaskState]:
    run = await store.find_run("etl", run_id)
    assert run is not None
    return {t.task_id: t.state for t in await store.list_task_instances(run_pk=run.pk)}


async def test_a_viewer_may_not_mark_nor_clear_failed(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    for url in (f"{MARK}?state=success", CLEAR_FAILED):
        assert (await client.post(url, headers=auth_header("viewer"))).status_code == 403
        assert (await client.post(url)).status_code == 401
    assert (await _states(store, "r"))["transform"] is TaskState.FAILED


async def test_marking_a_finished_runs_task_success_reopens_the_tasks_it_failed(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    r = await client.post(f"{MARK}?state=success", headers=auth_header("operator"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["marked"], body["reopened"], body["state"]) == (["transform"], ["load"], "success")
    assert body["run"]["state"] == "running"  # for the scheduler to carry on
    assert await _states(store, "r") == {
        "extract": TaskState.SUCCESS,
        "transform": TaskState.SUCCESS,
        "load": TaskState.NONE,
    }
    # The run is running now: marking again records a request for the scheduler.
    again = await client.post(f"{MARK}?state=failed", headers=auth_header("admin"))
    assert again.status_code == 202, again.text
    assert again.json()["pending"] is True
    (request,) = await pending_clears(store)
    assert (request.action, request.task_id, request.requested_by) == (
        "failed",
        "transform",
        "admin",
    )


async def test_bad_marks_say_what_is_wrong(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    op = auth_header("operator")
    bad = await client.post(f"{MARK}?state=done", headers=op)
    assert bad.status_code == 422 and "state" in bad.text
    missing = await client.post(MARK, headers=op)
    assert missing.status_code == 422
    already = await client.post(
        "/api/v1/dags/etl/runs/r/tasks/extract/mark?state=success", headers=op
    )
    assert already.status_code == 409
    assert already.json()["detail"] == "task 'extract' is success already; nothing was marked"
    queued = await client.post("/api/v1/dags/etl/runs/q/tasks/load/mark?state=failed", headers=op)
    assert queued.status_code == 409 and "queued" in queued.json()["detail"]
    nothing = await client.post("/api/v1/dags/etl/runs/q/clear_failed", headers=op)
    assert nothing.status_code == 409
    unknown = await client.post("/api/v1/dags/etl/runs/r/tasks/nope/mark?state=failed", headers=op)
    assert unknown.status_code == 404
    assert (await _states(store, "r"))["transform"] is TaskState.FAILED  # nothing changed


async def test_clear_failed_clears_the_failed_and_upstream_failed_of_a_finished_run(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    r = await client.post(CLEAR_FAILED, headers=auth_header("operator"))
    assert r.status_code == 200, r.text
    assert r.json()["cleared"] == ["load", "transform"]
    assert r.json()["run"]["state"] == RunState.RUNNING.value
    states = await _states(store, "r")
    assert states == {
        "extract": TaskState.SUCCESS,
        "transform": TaskState.NONE,
        "load": TaskState.NONE,
    }
    # Nothing failed any more: said, not a silent no-op.
    again = await client.post(CLEAR_FAILED, headers=auth_header("operator"))
    assert again.status_code == 409
    assert again.json()["detail"] == "run 'r' (running) has no failed task; nothing was cleared"


async def test_every_change_to_a_queued_runs_tasks_is_refused_alike(
    client: httpx.AsyncClient, store: Store
) -> None:
    """Clear, mark and clear failed share one check: the same 409 body, the same
    sentence but for what was not done, and nothing written nor requested."""
    await seed(store)
    op = auth_header("operator")
    before = await _states(store, "q")
    q = "/api/v1/dags/etl/runs/q"
    refusals = {
        f"{q}/tasks/extract/clear": "cleared",
        f"{q}/tasks/extract/clear?downstream=true": "cleared",
        f"{q}/tasks/load/mark?state=failed": "marked",
        f"{q}/tasks/extract/mark?state=success&downstream=true": "marked",
        f"{q}/clear_failed": "cleared",
    }
    for url, done in refusals.items():
        response = await client.post(url, headers=op)
        assert response.status_code == 409, (url, response.text)
        assert response.json() == {
            "detail": f"run 'q' is queued: none of its tasks has run yet; nothing was {done}"
        }, url
    assert await _states(store, "q") == before
    assert await pending_clears(store) == []
