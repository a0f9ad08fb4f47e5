"""*Why is it waiting?* through the API: each reason, with its numbers, from the store."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from leoflow.api.app import create_app
from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from leoflow.store.rows import RunRow
from tests.integration.api.conftest import auth_header, make_auth, make_settings, put_dag
from tests.integration.api.seed import SEEDS, move

V = auth_header("viewer")
BUSY = """\
dag_id: busy
max_active_runs: 10
max_active_tasks: 10
tasks:
  extract: {command: x}
  transform: {command: x, pool: warehouse}
  load: {command: x}
"""


async def run_of(store: Store, dag_id: str, run_id: str, *, running: bool = True) -> RunRow:
    row = await store.create_run(
        dag_id, run_id, run_type="manual", logical_date=None, conf={}, tasks=SEEDS, epoch=None
    )
    if running:
        assert await store.transition_run(row.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    return row


async def task(store: Store, run: RunRow, task_id: str) -> int:
    tis = await store.list_task_instances(run_pk=run.pk)
    return next(t.pk for t in tis if t.task_id == task_id)


async def why(client: httpx.AsyncClient, dag_id: str, run_id: str, task_id: str) -> dict:  # type: ignore[type-arg]
    response = await client.get(
        f"/api/v1/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/why", headers=V
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


S, Q, R = TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING


@pytest.fixture
def app(store: Store, tmp_path: Path) -> FastAPI:
    settings = make_settings(tmp_path, parallelism=3, pools={"warehouse": 2})
    return create_app(store, settings, auth=make_auth())


async def test_parallelism(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    await put_dag(store, BUSY)
    busy = await run_of(store, "busy", "b")
    for task_id in ("extract", "load"):
        await move(store, await task(store, busy, task_id), S, Q, R)
    other = await run_of(store, "busy", "b2")
    await move(store, await task(store, other, "extract"), S, Q)
    run = await run_of(store, "etl", "r")
    await move(store, await task(store, run, "extract"), S)
    answer = await why(client, "etl", "r", "extract")
    assert answer["waiting"] is True and answer["reason"] == "parallelism"
    assert (answer["used"], answer["limit"], answer["needed"]) == (3, 3, 1)
    assert answer["message"] == "parallelism: 3 of 3 task slots in use"


async def test_dag_max_active_tasks(client: httpx.AsyncClient, store: Store) -> None:
    limited = BUSY.replace("dag_id: busy", "dag_id: lim").replace(
        "max_active_tasks: 10", "max_active_tasks: 2"
    )
    await put_dag(store, limited)
    first = await run_of(store, "lim", "a")
    await move(store, await task(store, first, "extract"), S, Q, R)
    await move(store, await task(store, first, "load"), S, Q, R)
    second = await run_of(store, "lim", "b")
    await move(store, await task(store, second, "extract"), S)
    answer = await why(client, "lim", "b", "extract")
    assert answer["reason"] == "dag_max_active_tasks"
    assert (answer["used"], answer["limit"]) == (2, 2)
    assert answer["message"] == "DAG lim has 2 of 2 max_active_tasks running"


async def test_pool_slots(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store, BUSY)
    a, b = await run_of(store, "busy", "a"), await run_of(store, "busy", "b")
    await move(store, await task(store, a, "transform"), S, Q, R)
    await move(store, await task(store, b, "transform"), S, Q)
    c = await run_of(store, "busy", "c")
    await move(store, await task(store, c, "transform"), S)
    answer = await why(client, "busy", "c", "transform")
    assert answer["reason"] == "pool_slots"
    assert (answer["used"], answer["limit"], answer["needed"]) == (2, 2, 1)
    assert answer["message"] == "pool warehouse has 0 of 2 slots free; this task needs 1"


async def test_a_pool_resized_through_the_api_counts(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, BUSY)
    a = await run_of(store, "busy", "a")
    await move(store, await task(store, a, "transform"), S)
    await store.upsert_pool("warehouse", 0)
    answer = await why(client, "busy", "a", "transform")
    assert answer["reason"] == "pool_too_small" and answer["limit"] == 0


async def test_nothing_blocks(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store, BUSY)
    a = await run_of(store, "busy", "a")
    await move(store, await task(store, a, "extract"), S)
    answer = await why(client, "busy", "a", "extract")
    assert answer["waiting"] is False and answer["reason"] == "admit_next_tick"


async def test_upstreams(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    run = await run_of(store, "etl", "r")
    await move(store, await task(store, run, "extract"), S, Q, R)
    answer = await why(client, "etl", "r", "transform")
    assert answer["reason"] == "upstream" and answer["waiting"] is True
    assert answer["upstreams"] == [{"task_id": "extract", "state": "running"}]
    assert answer["message"] == "waiting for 1 of 1 upstream task; still running: extract (running)"


async def test_retry_delay(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)
    run = await run_of(store, "etl", "r")
    pk = await task(store, run, "transform")
    due = time.time() + 600
    await move(store, pk, S, Q, R)
    await move(store, pk, TaskState.UP_FOR_RETRY, next_retry_at=due)
    answer = await why(client, "etl", "r", "transform")
    assert answer["reason"] == "retry_delay"
    assert (answer["used"], answer["limit"]) == (1, 3)
    assert answer["message"].startswith("try 1 failed; try 2 of 3 is due at ")
    assert "(in 9m" in answer["message"] or "(in 10m" in answer["message"]
    assert answer["retry_at"] is not None


async def test_max_active_runs(client: httpx.AsyncClient, store: Store) -> None:
    await put_dag(store)  # max_active_runs: 2
    await run_of(store, "etl", "a")
    await run_of(store, "etl", "b")
    await run_of(store, "etl", "c", running=False)
    await run_of(store, "etl", "d", running=False)
    answer = await why(client, "etl", "d", "extract")
    assert answer["reason"] == "max_active_runs"
    assert (answer["used"], answer["limit"]) == (2, 2)
    assert answer["message"] == (
        "run d is queued: DAG etl has 2 of 2 max_active_runs running; "
        "1 older queued run ahead of it"
    )
