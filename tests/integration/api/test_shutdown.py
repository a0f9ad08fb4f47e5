"""Stopping the server with the web UI open: its live streams end at once (an SSE
``closing`` event, then the end of the response) instead of holding uvicorn's
graceful shutdown until its grace runs out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from leoflow.api import server
from leoflow.store import Store
from tests.integration.api.conftest import make_settings
from tests.integration.api.seed import seed_with_a_running_try
from tests.integration.api.test_server import start_lite


async def _events(response: httpx.Response, seen: list[str]) -> None:
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            seen.append(line.removeprefix("event: "))


async def test_open_ui_streams_end_when_lite_stops(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed_with_a_running_try(store)
    # A grace far longer than the waits below: a stream that held the shutdown
    # would fail the test, not slow it.
    monkeypatch.setattr(server, "GRACEFUL_SHUTDOWN", 3600)
    settings = make_settings(tmp_path, api_listen="127.0.0.1:0")
    url, closer, said = await start_lite(settings, store)
    page_events: list[str] = []
    log_events: list[str] = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        # Logged in as Lite's owner by the one-time link it printed.
        link = said[1].split()[3].removeprefix(url)
        assert (await client.get(link)).status_code == 303
        page = client.stream("GET", "/ui/events", params={"path": "/dags/etl"})
        log = client.stream(
            "GET", "/ui/log/stream", params={"dag": "etl", "run": "q", "task": "extract", "try": 1}
        )
        async with page as page_response, log as log_response:
            assert page_response.status_code == 200 and log_response.status_code == 200
            readers = [
                asyncio.create_task(_events(page_response, page_events)),
                asyncio.create_task(_events(log_response, log_events)),
            ]
            while "update" not in page_events:  # the page stream is live
                assert not readers[0].done()
                await asyncio.sleep(0.05)
            stopping = asyncio.create_task(closer())  # type: ignore[operator]
            # Both streams end by themselves, each saying why.
            await asyncio.wait_for(asyncio.gather(*readers), 60)
            await asyncio.wait_for(stopping, 60)
    assert page_events[-1] == "closing", page_events
    assert log_events == ["closing"], log_events
