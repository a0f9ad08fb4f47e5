"""Logs by try: whole, ``Range`` and ``offset``/``limit`` (206, Content-Range), 416,
and follow until the try is over."""

from __future__ import annotations

import asyncio

import httpx

from leoflow.domain.states import TaskState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header
from tests.integration.api.seed import move, seed

OP = auth_header("operator")
LOG = "/api/v1/dags/etl/runs/r/tasks/extract/logs/1"
DATA = b"hello\nworld\n"  # what seed() wrote: 12 bytes


async def test_whole_log(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    response = await client.get(LOG, headers=OP)
    assert response.status_code == 200
    assert response.content == DATA
    assert response.headers["X-Log-Size"] == "12"
    assert response.headers["Accept-Ranges"] == "bytes"
    assert response.headers["Content-Type"].startswith("text/plain")


async def test_range_header_gives_206(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    cases = {
        "bytes=0-4": (b"hello", "bytes 0-4/12"),
        "bytes=6-": (b"world\n", "bytes 6-11/12"),
        "bytes=-3": (b"ld\n", "bytes 9-11/12"),
        "bytes=6-100": (b"world\n", "bytes 6-11/12"),
        "bytes=-100": (DATA, "bytes 0-11/12"),
    }
    for header, (body, content_range) in cases.items():
        response = await client.get(LOG, headers={**OP, "Range": header})
        assert response.status_code == 206, header
        assert response.content == body, header
        assert response.headers["Content-Range"] == content_range, header


async def test_offset_and_limit_give_206(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    response = await client.get(LOG, params={"offset": 2, "limit": 3}, headers=OP)
    assert response.status_code == 206
    assert response.content == b"llo"
    assert response.headers["Content-Range"] == "bytes 2-4/12"
    response = await client.get(LOG, params={"offset": 6}, headers=OP)
    assert response.content == b"world\n" and response.status_code == 206
    # The header wins over the query.
    response = await client.get(LOG, params={"offset": 6}, headers={**OP, "Range": "bytes=0-0"})
    assert response.content == b"h"


async def test_past_the_end_is_416(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    for params, headers in (({"offset": 12}, {}), ({}, {"Range": "bytes=12-"})):
        response = await client.get(LOG, params=params, headers={**OP, **headers})
        assert response.status_code == 416
        assert response.headers["Content-Range"] == "bytes */12"
        assert "12 bytes" in response.json()["detail"]


async def test_malformed_range_is_ignored(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    for header in ("pages=1-2", "bytes=5-2", "bytes=-", "bytes=1-2,4-5"):
        response = await client.get(LOG, headers={**OP, "Range": header})
        assert response.status_code == 200 and response.content == DATA, header


async def test_a_try_that_has_not_happened_is_404(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    response = await client.get(LOG.replace("/logs/1", "/logs/2"), headers=OP)
    assert response.status_code == 404 and "no try 2" in response.json()["detail"]
    response = await client.get(LOG.replace("/logs/1", "/logs/0"), headers=OP)
    assert response.status_code == 422


async def test_follow_of_a_finished_try_returns_the_log_and_ends(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    response = await client.get(LOG, params={"follow": "true", "offset": 6}, headers=OP)
    assert response.status_code == 200 and response.content == b"world\n"


async def test_follow_streams_until_the_try_ends(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)
    q = await store.find_run("etl", "q")
    assert q is not None
    ti = next(t for t in await store.list_task_instances(run_pk=q.pk) if t.task_id == "extract")
    await move(store, ti.pk, TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
    await store.append_log(ti.pk, 1, b"one\n")

    async def task_side() -> None:
        await asyncio.sleep(0.1)
        await store.append_log(ti.pk, 1, b"two\n")
        await asyncio.sleep(0.1)
        await store.append_log(ti.pk, 1, b"three\n")
        await move(store, ti.pk, TaskState.SUCCESS)

    writer = asyncio.create_task(task_side())
    response = await asyncio.wait_for(
        client.get(
            "/api/v1/dags/etl/runs/q/tasks/extract/logs/1", params={"follow": True}, headers=OP
        ),
        10,
    )
    await writer
    assert response.status_code == 200
    assert response.content == b"one\ntwo\nthree\n"
