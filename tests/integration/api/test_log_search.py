"""Logs by lines: search on the server (API and UI), a page around a line, the
download, the live stream's numbering, and what bad input and missing logs answer."""

from __future__ import annotations

import re

import httpx

from leoflow.api import log_lines
from leoflow.domain.states import TaskState
from leoflow.store import Store
from tests.integration.api.conftest import auth_header
from tests.integration.api.seed import move, seed, seed_with_a_running_try
from tests.integration.api.test_web_ui import _login, ui  # noqa: F401

VIEWER = auth_header("viewer")
SEARCH = "/api/v1/dags/etl/runs/r/tasks/extract/logs/1/search"
UI = "dag=etl&run=r&task=extract&try=1"
# 3 MB of numbered lines crosses the 1 MiB blocks the search reads in.
LINES = 60_000
BODY = b"".join(b"line %06d of the log %s\n" % (i, b"." * 32) for i in range(1, LINES + 1))


async def _extract(store: Store, run_id: str = "r") -> int:
    run = await store.find_run("etl", run_id)
    assert run is not None
    tis = await store.list_task_instances(run_pk=run.pk)
    return next(t.pk for t in tis if t.task_id == "extract")


async def _big_log(store: Store) -> None:
    await seed(store)
    await store.append_log(await _extract(store), 1, BODY)


async def test_search_lists_numbered_lines_across_blocks(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _big_log(store)
    # hello/world are lines 1 and 2 (seed's log); line i of BODY is line i + 2.
    for i in (1, 30_000, 44_739, LINES):
        found = (await client.get(SEARCH, params={"q": f"line {i:06d} "}, headers=VIEWER)).json()
        assert [(m["line"], m["text"][:11]) for m in found["matches"]] == [(i + 2, f"line {i:06d}")]
        start = found["matches"][0]["offset"]
        got = await client.get(SEARCH[:-7], params={"offset": start, "limit": 11}, headers=VIEWER)
        assert got.content == f"line {i:06d}".encode()
    assert found["size"] == 12 + len(BODY) and not found["truncated"]
    # Case folded by default, exact with case=true; bounded by limit, saying so.
    found = (await client.get(SEARCH, params={"q": "HELLO"}, headers=VIEWER)).json()
    assert [m["line"] for m in found["matches"]] == [1]
    found = await client.get(SEARCH, params={"q": "HELLO", "case": "true"}, headers=VIEWER)
    assert found.json()["matches"] == []
    found = await client.get(SEARCH, params={"q": "of the log", "limit": 5}, headers=VIEWER)
    assert [m["line"] for m in found.json()["matches"]] == [3, 4, 5, 6, 7]
    assert found.json()["truncated"] is True


async def test_search_refuses_bad_input_and_says_when_a_log_is_missing(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    for q, words in (("", "expected text"), ("a\nb", "line break"), ("x" * 201, "at most 200")):
        r = await client.get(SEARCH, params={"q": q}, headers=VIEWER)
        assert r.status_code == 422 and words in r.json()["detail"], q
    r = await client.get(SEARCH, params={"q": "x", "limit": 0}, headers=VIEWER)
    assert r.status_code == 422
    r = await client.get(SEARCH.replace("/logs/1/", "/logs/2/"), params={"q": "x"}, headers=VIEWER)
    assert r.status_code == 404 and "no try 2" in r.json()["detail"]
    gone = SEARCH.replace("/runs/r/", "/runs/pruned/")
    r = await client.get(gone, params={"q": "x"}, headers=VIEWER)
    assert r.status_code == 404 and "pruned" in r.json()["detail"]
    # transform's try 1 failed and wrote nothing: over, so nothing will ever match.
    empty = SEARCH.replace("/extract/", "/transform/")
    r = await client.get(empty, params={"q": "x"}, headers=VIEWER)
    assert r.status_code == 404 and "has no log" in r.json()["detail"]


async def test_search_over_an_empty_running_try_is_no_match_yet(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed_with_a_running_try(store)
    live = SEARCH.replace("/runs/r/", "/runs/q/")
    r = await client.get(live, params={"q": "x"}, headers=VIEWER)
    assert r.status_code == 200 and r.json()["matches"] == []


async def test_ui_search_page_at_a_line_and_download(
    ui: httpx.AsyncClient,  # noqa: F811
    store: Store,
) -> None:
    await store.append_log(await _extract(store), 1, BODY)
    await _login(ui, "viewer")
    found = (await ui.get(f"/ui/log/search?{UI}&q=line%20060000")).json()
    assert found["count"] == 1 and 'href="#L60002"' in found["html"]
    assert "1 line holds" in found["words"]
    bad = await ui.get(f"/ui/log/search?{UI}&q=")
    assert bad.status_code == 422 and "expected text" in bad.json()["detail"]
    page = (await ui.get(f"/ui/log?{UI}&line=30002")).json()
    assert page["start"] < page["end"] < page["size"]
    numbers = [int(n) for n in re.findall(r'id="L(\d+)"', page["html"])]
    assert 30002 in numbers and numbers == list(range(numbers[0], numbers[-1] + 1))
    assert numbers[0] == page["first_line"] and page["next_line"] == numbers[-1] + 1
    line = re.search(r'id="L30002">.*?</a>(.*?)\n</span>', page["html"])
    assert line is not None and line.group(1).startswith("line 030000 ")
    later = (await ui.get(f"/ui/log?{UI}&after={page['end']}")).json()
    assert later["start"] == page["end"] and later["first_line"] == page["next_line"]
    missing = await ui.get(f"/ui/log?{UI}&line=60003")
    assert missing.status_code == 404 and "no line 60003" in missing.json()["detail"]
    whole = await ui.get(f"/ui/log/download?{UI}")
    assert whole.status_code == 200 and whole.content == b"hello\nworld\n" + BODY
    assert whole.headers["content-disposition"] == ('attachment; filename="etl.r.extract.try1.log"')


async def test_the_stream_sends_whole_numbered_lines(
    ui: httpx.AsyncClient,  # noqa: F811
    store: Store,
) -> None:
    ti = await _extract(store, "q")
    await move(store, ti, TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
    await store.append_log(ti, 1, b"one\ntwo\nhalf")
    await move(store, ti, TaskState.SUCCESS)
    await _login(ui, "viewer")
    async with ui.stream("GET", "/ui/log/stream?dag=etl&run=q&task=extract&try=1") as r:
        text = (await r.aread()).decode()
    ids = re.findall(r"^id: (.*)$", text, re.M)
    assert ids[-1] == "12:3"  # the end: offset 12, line 3 (unended, sent as the try is over)
    assert re.findall(r'id=\\"L(\d+)\\"', text) == ["1", "2", "3"]
    # Resumed after line 2 (Last-Event-ID "offset:line"): line 3 only, numbered 3.
    headers = {"Last-Event-ID": "8:3"}
    async with ui.stream(
        "GET", "/ui/log/stream?dag=etl&run=q&task=extract&try=1", headers=headers
    ) as r:
        text = (await r.aread()).decode()
    assert re.findall(r'id=\\"L(\d+)\\"', text) == ["3"] and "half" in text


async def test_lines_helpers_agree_with_splitlines() -> None:
    data = b"a\n\nbb\nccc\n" * 1000 + b"tail"

    async def read(offset: int, length: int) -> bytes:
        return data[offset : offset + min(length, 7)]  # short reads: blocks of 7 bytes

    lines = data.split(b"\n")
    for n in (1, 2, 3, 4, 2000, len(lines)):
        at = await log_lines.start_of_line(read, len(data), n)
        assert at == len(b"\n".join(lines[: n - 1])) + (1 if n > 1 else 0), n
        assert await log_lines.lines_before(read, at) == n - 1
    assert await log_lines.start_of_line(read, len(data), len(lines) + 1) is None
