"""The web UI's server side over ASGI: pages, sessions, CSRF, origin and role checks.

The browser end of the same rules is tests/e2e/test_web_ui.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.api.ui import waiting
from leoflow.domain.states import RunState, TaskState
from leoflow.settings import Settings
from leoflow.store import Store
from tests.integration.api.conftest import TOKENS, make_auth
from tests.integration.api.seed import SEEDS, move, seed, snapshot

BASE = "http://localhost"
SAME = {"Origin": BASE, "Content-Type": "application/json"}


async def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


@pytest.fixture
async def ui(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await seed(store)
    async with await _client(create_app(store, settings, auth=make_auth())) as c:
        yield c


@pytest.fixture
async def open_ui(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await seed(store)
    async with await _client(create_app(store, settings, auth=Auth.disabled())) as c:
        yield c


async def _login(c: httpx.AsyncClient, role: str) -> str:
    r = await c.post("/ui/login", json={"token": TOKENS[role]}, headers={"Origin": BASE})
    assert r.status_code == 200, r.text
    page = await c.get("/dags/etl")
    assert page.status_code == 200
    marker = 'name="csrf-token" content="'
    start = page.text.index(marker) + len(marker)
    return page.text[start : page.text.index('"', start)]


PAGES = [
    "/",
    "/?q=et&state=active",
    "/dags/etl",
    "/dags/etl?run=r",
    "/dags/etl/runs/r",
    "/dags/etl/runs/r/tasks/transform",
    "/dags/etl/runs/q/tasks/extract",
    "/waiting",
    "/pools",
]


@pytest.mark.parametrize("path", PAGES)
async def test_every_page_renders_for_a_viewer(ui: httpx.AsyncClient, path: str) -> None:
    await _login(ui, "viewer")
    r = await ui.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    # A viewer is offered no action.
    for control in ('data-action="pause"', 'id="trigger-open"', 'data-action="clear"'):
        assert control not in r.text


async def test_pages_show_what_the_store_holds(ui: httpx.AsyncClient) -> None:
    await _login(ui, "operator")
    dag = (await ui.get("/dags/etl?run=r")).text
    assert 'data-task="transform" data-state="failed"' in dag
    assert 'data-task="extract" data-state="success"' in dag
    assert 'id="trigger-open"' in dag
    run = (await ui.get("/dags/etl/runs/r")).text
    assert 'id="clear-transform"' in run and "upstream failed" in run
    waiting = (await ui.get("/dags/etl/runs/q/tasks/extract")).text
    assert "max_active_runs" in waiting
    pools = (await ui.get("/pools")).text
    assert "gpu" in pools and 'class="resize"' not in pools  # resizing needs admin
    missing = await ui.get("/dags/nope")
    assert missing.status_code == 404 and "no DAG" in missing.text


async def test_no_session_goes_to_the_login_page(ui: httpx.AsyncClient) -> None:
    r = await ui.get("/dags/etl/runs/r")
    assert r.status_code == 303
    assert r.headers["location"] == "/login?next=%2Fdags%2Fetl%2Fruns%2Fr"
    assert (await ui.get("/login")).status_code == 200
    bad = await ui.post("/ui/login", json={"token": "wrong"}, headers={"Origin": BASE})
    assert bad.status_code == 401 and "leoflow_session" not in bad.headers.get("set-cookie", "")


async def test_the_session_cookie_is_httponly_strict_and_holds_no_token(
    ui: httpx.AsyncClient,
) -> None:
    r = await ui.post("/ui/login", json={"token": TOKENS["viewer"]}, headers={"Origin": BASE})
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("leoflow_session=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http here; https sets it
    assert TOKENS["viewer"] not in cookie
    # A tampered cookie is no session.
    value = ui.cookies["leoflow_session"]
    ui.cookies.clear()
    ui.cookies.set("leoflow_session", value[:-2] + ("00" if not value.endswith("00") else "11"))
    assert (await ui.get("/")).status_code == 303


async def test_actions_need_same_origin_json_csrf_and_the_role(
    ui: httpx.AsyncClient, store: Store
) -> None:
    before = await snapshot(store)
    csrf = await _login(ui, "viewer")
    body = {"dag_id": "etl"}
    # A viewer with a valid CSRF token is refused: the role.
    r = await ui.post("/ui/actions/trigger", json=body, headers={**SAME, "X-CSRF-Token": csrf})
    assert r.status_code == 403 and "needs operator" in r.json()["detail"]
    csrf = await _login(ui, "operator")
    cases = [
        ({"Content-Type": "application/json", "X-CSRF-Token": csrf}, 403),  # no Origin
        ({**SAME, "Origin": "http://evil.test", "X-CSRF-Token": csrf}, 403),
        ({**SAME, "X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}, 403),
        ({**SAME, "Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": csrf}, 415),
        (SAME, 403),  # no CSRF token
        ({**SAME, "X-CSRF-Token": "0" * 64}, 403),
    ]
    for headers, status in cases:
        r = await ui.post("/ui/actions/trigger", json=body, headers=headers)
        assert r.status_code == status, (headers, r.text)
    assert await snapshot(store) == before
    # Everything right: the run is created through the API's own trigger.
    r = await ui.post(
        "/ui/actions/trigger",
        json={"dag_id": "etl", "conf": {"day": 1}, "new_run_id": "from_ui"},
        headers={**SAME, "X-CSRF-Token": csrf},
    )
    assert r.status_code == 200, r.text
    run = await store.find_run("etl", "from_ui")
    assert run is not None and run.conf == {"day": 1}


async def test_the_server_checks_the_conf_too(ui: httpx.AsyncClient, store: Store) -> None:
    csrf = await _login(ui, "operator")
    headers = {**SAME, "X-CSRF-Token": csrf}
    r = await ui.post("/ui/actions/trigger", json={"dag_id": "etl", "conf": [1]}, headers=headers)
    assert r.status_code == 422 and "conf: expected a JSON object" in r.json()["detail"]
    r = await ui.post(
        "/ui/actions/trigger", content=b'{"dag_id": "etl", "conf": {', headers=headers
    )
    assert r.status_code == 400 and "not JSON" in r.json()["detail"]
    assert [x.run_id for x in await store.list_runs(dag_id="etl")] == ["q", "r"]


async def test_clear_cancel_pause_and_pools_go_through_the_api(
    ui: httpx.AsyncClient, store: Store
) -> None:
    csrf = await _login(ui, "operator")
    headers = {**SAME, "X-CSRF-Token": csrf}
    r = await ui.post(
        "/ui/actions/clear",
        json={"dag_id": "etl", "run_id": "r", "task_id": "transform", "downstream": True},
        headers=headers,
    )
    assert r.json() == {"cleared": ["load", "transform"]}
    r = await ui.post("/ui/actions/cancel", json={"dag_id": "etl", "run_id": "q"}, headers=headers)
    assert r.json() == {"state": "failed"}
    again = await ui.post(
        "/ui/actions/cancel", json={"dag_id": "etl", "run_id": "q"}, headers=headers
    )
    assert again.status_code == 409
    r = await ui.post("/ui/actions/pause", json={"dag_id": "etl"}, headers=headers)
    assert r.json() == {"paused": True}
    resize = await ui.post(
        "/ui/actions/pool_resize", json={"name": "gpu", "slots": 5}, headers=headers
    )
    assert resize.status_code == 403  # pools need admin
    assert {p.name: p.slots for p in await store.list_pools()}["gpu"] == 2


async def test_a_viewer_reads_logs_paged_by_bytes_in_numbered_lines(
    ui: httpx.AsyncClient, store: Store
) -> None:
    run = await store.find_run("etl", "r")
    assert run is not None
    (extract,) = [
        t for t in await store.list_task_instances(run_pk=run.pk) if t.task_id == "extract"
    ]
    more = b"\x1b[31m<red>\x1b[0m\n" + b"x" * 70_000 + b"\nend\n"
    await store.append_log(extract.pk, 1, more)
    query = "/ui/log?dag=etl&run=r&task=extract&try=1"
    await _login(ui, "viewer")  # logs are stored masked: every role reads them
    tail = (await ui.get(query)).json()
    size = len(b"hello\nworld\n") + len(more)
    assert tail["size"] == tail["end"] == size
    # The last page starts at a line: the 70,000-byte line is left for earlier pages.
    assert tail["html"] == _numbered(5, "end") and tail["start"] == size - 4
    assert (tail["first_line"], tail["next_line"]) == (5, 6)
    pieces, start = [tail["html"]], tail["start"]
    while start > 0:
        page = (await ui.get(f"{query}&before={start}")).json()
        assert page["end"] == start and page["start"] < start
        pieces.insert(0, page["html"])
        start = page["start"]
    assert len(pieces) >= 3
    joined = "".join(pieces)
    assert joined.startswith(_numbered(1, "hello") + _numbered(2, "world") + _numbered(3, RED))
    assert joined.endswith(_numbered(5, "end"))
    # The 70,000-byte line is shown in pieces (pages hold 64 KiB), each numbered 4.
    assert set(re.findall(r'id="L(\d+)"', joined)) == {"1", "2", "3", "4", "5"}
    assert re.sub(r"<[^>]*>|\n", "", joined).count("x") == 70_000


RED = '<span class="a-f1">&lt;red&gt;</span>'


def _numbered(n: int, html: str) -> str:
    return (
        f'<span class="ll" id="L{n}"><a class="ln" href="#L{n}" data-n="{n}" '
        f'aria-label="line {n}"></a>{html}\n</span>'
    )


async def test_lite_without_tokens_gives_an_anonymous_session_that_still_needs_csrf(
    open_ui: httpx.AsyncClient, store: Store
) -> None:
    page = await open_ui.get("/dags/etl")
    assert page.status_code == 200 and "leoflow_session=" in page.headers["set-cookie"]
    assert 'id="trigger-open"' in page.text
    r = await open_ui.post("/ui/actions/pause", json={"dag_id": "etl"}, headers=SAME)
    assert r.status_code == 403
    marker = 'name="csrf-token" content="'
    start = page.text.index(marker) + len(marker)
    csrf = page.text[start : page.text.index('"', start)]
    r = await open_ui.post(
        "/ui/actions/pause", json={"dag_id": "etl"}, headers={**SAME, "X-CSRF-Token": csrf}
    )
    assert r.status_code == 200
    dag = await store.get_dag("etl")
    assert dag is not None and dag.paused


async def test_logout_ends_the_session(ui: httpx.AsyncClient, tmp_path: Path) -> None:
    csrf = await _login(ui, "viewer")
    cookie = ui.cookies["leoflow_session"]
    r = await ui.post("/ui/logout", json={}, headers={**SAME, "X-CSRF-Token": csrf})
    assert r.status_code == 200
    ui.cookies.set("leoflow_session", cookie)  # even replayed, the session is over
    assert (await ui.get("/")).status_code == 303
    # A write with it is refused by the guard, from the cookie, before the route.
    pause = {"json": {"dag_id": "etl"}, "headers": {**SAME, "X-CSRF-Token": csrf}}
    r = await ui.post("/ui/actions/pause", **pause)  # type: ignore[arg-type]
    assert r.status_code == 401 and "session" in r.json()["detail"]
    ui.cookies.set("leoflow_session", cookie[:-4] + "0000")  # a forged signature
    r = await ui.post("/ui/actions/pause", **pause)  # type: ignore[arg-type]
    assert r.status_code == 401 and "session" in r.json()["detail"]


async def test_waiting_classifies_a_bounded_number_and_counts_the_rest(
    open_ui: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await store.find_run("etl", "q")
    assert run is not None
    for ti in await store.list_task_instances(run_pk=run.pk):
        await move(store, ti.pk, TaskState.SCHEDULED)
    monkeypatch.setattr(waiting, "CLASSIFIED", 2)
    page = (await open_ui.get("/waiting")).text
    # Two classified by admission, the third counted, and the queued run q.
    assert "scheduled, behind the first 2 in admission order" in page
    assert page.count('<span class="count">1</span> scheduled, behind the first 2') == 1
    assert "DAG etl: max_active_runs" in page
    assert "4 waiting in" in page


async def test_a_running_run_offers_clear_and_the_answer_says_it_is_pending(
    ui: httpx.AsyncClient, store: Store
) -> None:
    run = await store.create_run(
        "etl", "live", run_type="manual", logical_date=None, conf={}, tasks=SEEDS, epoch=None
    )
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    await move(store, tis["extract"].pk, TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING)
    csrf = await _login(ui, "operator")
    page = (await ui.get("/dags/etl/runs/live")).text
    assert 'id="clear-extract"' in page  # a running task of a running run
    task = (await ui.get("/dags/etl/runs/live/tasks/extract")).text
    assert 'id="clear-task"' in task
    r = await ui.post(
        "/ui/actions/clear",
        json={"dag_id": "etl", "run_id": "live", "task_id": "extract", "downstream": False},
        headers={**SAME, "X-CSRF-Token": csrf},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"cleared": ["extract"], "pending": True}
    # Recorded for the scheduler, not applied here: the try is still running.
    assert (await store.get_task_instance(tis["extract"].pk)).state is TaskState.RUNNING  # type: ignore[union-attr]
