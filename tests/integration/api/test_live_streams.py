"""The web UI's live streams are bounded, against Lite's real server over sockets:
a session's newest stream makes its oldest end (``superseded``), past the total a new
stream is 503, and requests keep answering with every place taken."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AsyncExitStack
from pathlib import Path

import httpx

from leoflow.store import Store
from tests.integration.api.conftest import make_settings, put_dag
from tests.integration.api.seed import seed_with_a_running_try
from tests.integration.api.test_server import start_lite
from tests.support.waiting import until

PAGE = {"path": "/dags/etl"}
# Lite opened on loopback (no owner token): the bounds, not who may pass, are tested here.
OPEN_LITE = {"api_listen": "127.0.0.1:0", "api_open_on_loopback": True}


class Stream:
    """One open /ui/events response, its events read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events: list[str] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(httpx.ReadError):  # the server stopping at the test's end
            async for line in self.response.aiter_lines():
                if line.startswith("event: "):
                    self.events.append(line.removeprefix("event: "))

    async def has(self, event: str) -> None:
        async def seen() -> bool:
            return event in self.events

        await until(seen, f"the {event!r} event (seen {self.events})")

    async def ended(self) -> None:
        async with asyncio.timeout(60):
            await self.reader


async def _open(stack: AsyncExitStack, client: httpx.AsyncClient) -> Stream | httpx.Response:
    response = await stack.enter_async_context(client.stream("GET", "/ui/events", params=PAGE))
    if response.status_code != 200:
        await response.aread()
        return response
    stream = Stream(response)
    await stream.has("hello")
    return stream


async def test_live_streams_are_bounded_per_session_and_in_total(
    store: Store, tmp_path: Path
) -> None:
    await put_dag(store)
    settings = make_settings(tmp_path, ui_max_streams=10, ui_max_streams_per_session=3, **OPEN_LITE)
    url, closer, _ = await start_lite(settings, store)
    try:
        async with AsyncExitStack() as stack:
            tab = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=120))
            assert (await tab.get("/")).status_code == 200  # the session cookie
            mine: list[Stream] = []
            for n in range(12):  # one session, twelve tabs: its three newest stay live
                opened = await _open(stack, tab)
                assert isinstance(opened, Stream), opened.text
                mine.append(opened)
                if n >= 3:
                    await mine[n - 3].has("superseded")
                    await mine[n - 3].ended()
            assert [s.reader.done() for s in mine] == [True] * 9 + [False] * 3

            # Other sessions (each client its own) fill the total; the next is 503.
            others: list[Stream] = []
            for _ in range(7):
                other = await stack.enter_async_context(httpx.AsyncClient(base_url=url))
                opened = await _open(stack, other)
                assert isinstance(opened, Stream), opened.text
                others.append(opened)
            late = await stack.enter_async_context(httpx.AsyncClient(base_url=url))
            refused = await _open(stack, late)
            assert isinstance(refused, httpx.Response), refused.events
            assert refused.status_code == 503 and "ui_max_streams" in refused.text
            assert refused.headers["retry-after"]

            # Every place taken, requests still answer; the pages keep updating.
            assert (await late.get("/api/v1/dags")).status_code == 200
            made = await late.post("/api/v1/dags/etl/runs", json={"run_id": "during"})
            assert made.status_code == 201, made.text
            assert (await late.get("/dags/etl")).status_code == 200
            await others[0].has("update")

            # A stream that ends frees its place for the next.
            await others[0].response.aclose()
            others[0].reader.cancel()

            async def admitted() -> bool:
                again = await _open(stack, late)
                return isinstance(again, Stream)

            await until(admitted, "a place freed by a closed stream")
    finally:
        await closer()  # type: ignore[operator]


async def test_followed_logs_of_the_api_count_among_the_live_streams(
    store: Store, tmp_path: Path
) -> None:
    await seed_with_a_running_try(store)
    settings = make_settings(tmp_path, ui_max_streams=2, **OPEN_LITE)
    url, closer, _ = await start_lite(settings, store)
    follow = "/api/v1/dags/etl/runs/q/tasks/extract/logs/1"
    try:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            first = await stack.enter_async_context(
                client.stream("GET", follow, params={"follow": "true"})
            )
            page = await _open(stack, client)
            assert first.status_code == 200 and isinstance(page, Stream)
            refused = await client.get(follow, params={"follow": "true"})
            assert refused.status_code == 503 and "ui_max_streams" in refused.text
            assert (await client.get(follow)).status_code == 200  # not followed: no stream
            await first.aclose()

            async def admitted() -> bool:
                async with client.stream("GET", follow, params={"follow": "true"}) as again:
                    return again.status_code == 200

            await until(admitted, "the place of the closed follow")
    finally:
        await closer()  # type: ignore[operator]
