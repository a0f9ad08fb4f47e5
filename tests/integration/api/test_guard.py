"""The request guard on every route: a matrix over the app's routes (walked from
``app.routes``, so a route added later is covered without editing this file), each
against {foreign Host, cross-site Origin on a write, text/plain body, oversize body, no
token}. Each request is a raw ASGI call whose ``receive`` counts what the app pulled,
so "refused before the body was read" is observed, not assumed."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, WebSocket

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.api.guard import OPEN_PATHS, PROBE_PATHS
from leoflow.api.hosts import split_host
from leoflow.api.strict_json import check_strict_json
from leoflow.api.ui.gate import OPEN_WRITES, is_ui_path
from leoflow.settings import Settings
from leoflow.store import Store
from tests.integration.api.conftest import (
    DAG_YAML,
    TOKENS,
    auth_header,
    make_auth,
    make_settings,
)
from tests.integration.api.seed import seed

PATH_VALUES = {"dag_id": "etl", "run_id": "r", "task_id": "extract", "name": "gpu"}
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
ADMIN = auth_header("admin")
HOST = "localhost:8080"
TOKEN_BODY = json.dumps({"token": TOKENS["admin"]}).encode()


def walk_routes(routes: Any) -> Iterator[tuple[str, str]]:
    """(method, path template) of every route, through included routers of any depth."""
    for route in routes:
        nested = getattr(route, "original_router", None) or getattr(route, "routes", None)
        if nested is not None and not hasattr(route, "methods"):
            yield from walk_routes(getattr(nested, "routes", nested))
            continue
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                yield method, route.path


def concrete(template: str) -> str:
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: PATH_VALUES.get(m.group(1), "1"), template)


@dataclass
class Answer:
    status: int
    body: bytes
    pulled: int = 0  # bytes of request body the app (guard included) took from receive
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def detail(self) -> str:
        return str(json.loads(self.body)["detail"])


async def asgi(
    app: FastAPI,
    method: str,
    path: str,
    headers: dict[str, str],
    chunks: list[bytes] | None = None,
) -> Answer:
    """One request straight through the ASGI interface."""
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 40000),
    }
    # A request without a body still gets one empty body message, as from a server.
    pending = list(chunks) if chunks is not None else [b""]
    answer = Answer(0, b"")

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            answer.pulled += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    await asyncio.wait_for(app(scope, receive, send), 30)
    return answer


def body_headers(media: str, size: int | None) -> dict[str, str]:
    out = {"Host": HOST, "Content-Type": media}
    if size is not None:
        out["Content-Length"] = str(size)
    else:
        out["Transfer-Encoding"] = "chunked"
    return out


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, api_body_limit=4096, api_dag_body_limit=8192)


@pytest.fixture
async def guarded(store: Store, settings: Settings) -> FastAPI:
    await seed(store)
    return create_app(store, settings, auth=make_auth())


@pytest.fixture
async def admin(guarded: FastAPI) -> dict[str, str]:
    """An admin's credentials both ways: a bearer token (the API) and a web UI session
    cookie made by logging in (the UI's writes)."""
    login = await asgi(
        guarded, "POST", "/ui/login",
        {"Host": HOST, "Origin": f"http://{HOST}", "Content-Type": "application/json",
         "Content-Length": str(len(TOKEN_BODY))},
        [TOKEN_BODY],
    )  # fmt: skip
    assert login.status == 200, login.body
    cookie = login.headers["set-cookie"].split(";", 1)[0]
    return {**ADMIN, "Cookie": cookie}


def test_the_matrix_sees_every_route(guarded: FastAPI) -> None:
    routes = set(walk_routes(guarded.routes))
    # A floor, not the list: the walk must reach into the included routers.
    assert ("POST", "/api/v1/dags") in routes
    assert ("POST", "/api/v1/dags/{dag_id}/runs") in routes
    assert ("DELETE", "/api/v1/pools/{name}") in routes
    assert ("GET", "/healthz") in routes
    assert len(routes) >= 20


def _routes() -> list[tuple[str, str]]:
    # Collected from a real app (no store needed to list routes).
    app = create_app(None, Settings(home=Path("/nonexistent")), auth=Auth.disabled())  # type: ignore[arg-type]
    return sorted(set(walk_routes(app.routes)))


ROUTES = _routes()
# Outside /api without a session: the login page and its assets, the event stream
# (which only tells the page to go to the login page) and FastAPI's static docs page.
UI_OPEN = frozenset({"/login", "/ui/static/{name}", "/ui/events", "/docs/oauth2-redirect"})


def _media(method: str, template: str) -> str:
    return (
        "application/yaml"
        if (method, template) == ("POST", "/api/v1/dags")
        else ("application/json")
    )


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {t}" for m, t in ROUTES])
async def test_every_route_refuses_hostile_requests(
    guarded: FastAPI,
    store: Store,
    settings: Settings,
    admin: dict[str, str],
    method: str,
    template: str,
) -> None:
    path = concrete(template)
    media = _media(method, template)
    limit = settings.api_dag_body_limit if media == "application/yaml" else settings.api_body_limit
    body = b"{}" if media == "application/json" else DAG_YAML.encode()

    # A foreign Host (DNS rebinding): refused, except the probes kubelet sends by IP.
    for host in ("evil.example", "evil.example:8080", "localhost.evil.example", ""):
        answer = await asgi(guarded, method, path, {**admin, "Host": host})
        if template in PROBE_PATHS and method == "GET":
            assert answer.status != 400, answer.body
        else:
            assert answer.status == 400, (host, answer.body)
            assert "LEOFLOW_API_ALLOWED_HOSTS" in answer.detail

    # A cross-site write: refused whatever else the request gets right.
    if method in WRITES:
        for extra in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Origin": "http://localhost:3000"},  # same site, another origin
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": f"http://{HOST}", "Sec-Fetch-Site": "cross-site"},
        ):
            answer = await asgi(
                guarded, method, path, {**admin, **body_headers(media, len(body)), **extra},
                [body],
            )  # fmt: skip
            assert answer.status == 403, (extra, answer.body)
            assert "LEOFLOW_API_ALLOWED_ORIGINS" in answer.detail
            assert answer.pulled == 0

    # text/plain (and no type, and a form) is 415 on every route, body unread.
    for wrong in (
        "text/plain",
        "text/plain;charset=utf-8",
        "application/x-www-form-urlencoded",
        "",
    ):
        headers = {**admin, **body_headers(wrong, len(body))}
        if not wrong:
            del headers["Content-Type"]
        answer = await asgi(guarded, method, path, headers, [body])
        assert answer.status == 415, (wrong, answer.body)
        assert media in answer.detail
        assert answer.pulled == 0

    # Oversize: by Content-Length at once; chunked, stopped at the limit.
    answer = await asgi(
        guarded, method, path, {**admin, **body_headers(media, limit + 1)}, [b"x" * (limit + 1)]
    )
    assert answer.status == 413, answer.body
    assert answer.pulled == 0
    # Small enough for the server to discard, so the connection may live on.
    assert "connection" not in answer.headers
    chunk = b"x" * 1000
    answer = await asgi(
        guarded, method, path, {**admin, **body_headers(media, None)}, [chunk] * 100
    )
    assert answer.status == 413, answer.body
    assert "LEOFLOW_API_" in answer.detail and str(limit) in answer.detail
    assert answer.headers["connection"] == "close"  # the rest is not read
    assert answer.pulled <= limit + len(chunk)

    # No (or a bad) token: 401 from the headers; the body is never read.
    for token in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        answer = await asgi(
            guarded, method, path, {**token, **body_headers(media, len(body))}, [body]
        )
        if template in OPEN_PATHS:
            assert answer.status != 401
        elif is_ui_path(path) and method in WRITES and path not in OPEN_WRITES:
            # A web UI write without a valid session: refused by the guard from its
            # headers (the session cookie), like an API call without a token.
            assert answer.status == 401, (template, answer.status, answer.body)
            assert "session" in answer.detail
            assert answer.pulled == 0
        elif is_ui_path(path):
            # A UI page without a session is the login page or a refusal, never data;
            # only the login call itself reads its body (the token is in it).
            assert answer.status in (303, 307, 400, 401, 403, 404, 422) or (
                method == "GET" and template in UI_OPEN
            ), (template, answer.status)
            assert answer.pulled <= limit
        else:
            assert answer.status == 401, (token, answer.body)
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.pulled == 0


async def test_allowed_hosts_origins_and_the_cli_shape_pass(store: Store, tmp_path: Path) -> None:
    await seed(store)
    settings = make_settings(
        tmp_path,
        api_allowed_hosts=("leoflow-api.leoflow-system.svc", ".example.net", "pinned:9000"),
        api_allowed_origins=("https://ui.example.net",),
    )
    app = create_app(store, settings, auth=make_auth())
    ok_hosts = [
        "127.0.0.1:8080", "127.0.0.1", "localhost", "LOCALHOST:1234", "[::1]:8080", "[::1]",
        "leoflow-api.leoflow-system.svc:8080", "example.net", "a.b.example.net", "pinned:9000",
    ]  # fmt: skip
    for host in ok_hosts:
        answer = await asgi(app, "GET", "/api/v1/dags", {**ADMIN, "Host": host})
        assert answer.status == 200, (host, answer.body)
    for host in ("pinned:9001", "pinned", "evilexample.net", "[::2]", "127.0.0.2", "a b"):
        answer = await asgi(app, "GET", "/api/v1/dags", {**ADMIN, "Host": host})
        assert answer.status == 400, host

    # kubelet probes and Prometheus address the pod by IP: the probes answer; nothing else.
    pod_ip = {"Host": "10.244.1.7:8080"}
    for path in ("/healthz", "/metrics"):
        assert (await asgi(app, "GET", path, pod_ip)).status == 200, path
    assert (await asgi(app, "GET", "/api/v1/dags", {**ADMIN, **pod_ip})).status == 400
    assert (await asgi(app, "POST", "/healthz", pod_ip)).status == 400

    async def pause(extra: dict[str, str]) -> int:
        answer = await asgi(app, "POST", "/api/v1/dags/etl/pause", {**ADMIN, **extra})
        return answer.status

    # The CLI (httpx) sends neither Origin nor Sec-Fetch-Site.
    assert await pause({"Host": "127.0.0.1:8080"}) == 200
    # A page of this very server (a future UI at /), a listed origin, a typed URL.
    assert await pause({"Host": "localhost:8080", "Origin": "http://localhost:8080"}) == 200
    assert await pause({"Host": "x.example.net", "Origin": "https://x.example.net"}) == 200
    assert await pause({"Host": "api.example.net", "Origin": "https://ui.example.net",
                        "Sec-Fetch-Site": "same-site"}) == 200  # fmt: skip
    assert await pause({"Host": "localhost:8080", "Sec-Fetch-Site": "none"}) == 200
    # The scheme is not compared (behind a TLS proxy the request arrives as http); the
    # port is: another port is another origin.
    assert await pause({"Host": "localhost:8080", "Origin": "https://localhost:8080"}) == 200
    assert await pause({"Host": "localhost:8080", "Origin": "http://localhost:8081"}) == 403
    assert await pause({"Host": "localhost", "Origin": "http://localhost:8080"}) == 403
    assert await pause({"Host": "localhost", "Origin": "http://localhost"}) == 200


async def test_conf_is_strict_bounded_json(store: Store, tmp_path: Path) -> None:
    await seed(store)
    settings = make_settings(tmp_path, api_run_conf_limit=200, api_json_max_depth=8)
    app = create_app(store, settings, auth=make_auth())
    before = len(await store.list_runs(dag_id="etl", limit=100))

    async def trigger(raw: str) -> Answer:
        headers = {**auth_header("operator"), **body_headers("application/json", len(raw))}
        return await asgi(app, "POST", "/api/v1/dags/etl/runs", headers, [raw.encode()])

    for constant in ("NaN", "Infinity", "-Infinity"):
        answer = await trigger(f'{{"conf": {{"x": {constant}}}}}')
        assert answer.status == 422, answer.body
        assert constant in answer.detail
    deep = '{"conf": {"x": ' + "[" * 20 + "]" * 20 + "}}"
    answer = await trigger(deep)
    assert answer.status == 422 and "LEOFLOW_API_JSON_MAX_DEPTH" in answer.detail
    answer = await trigger(json.dumps({"conf": {"x": "y" * 300}}))
    assert answer.status == 422 and "LEOFLOW_API_RUN_CONF_LIMIT" in answer.detail
    assert len(await store.list_runs(dag_id="etl", limit=100)) == before

    answer = await trigger(json.dumps({"run_id": "ok", "conf": {"a": [1, 2.5, {"b": None}]}}))
    assert answer.status == 201, answer.body
    assert json.loads(answer.body)["conf"] == {"a": [1, 2.5, {"b": None}]}


def test_strict_json_and_host_parsing_edges() -> None:
    assert check_strict_json(b"[" * 100_000 + b"]" * 100_000, 32) is not None
    assert "out of range" in str(check_strict_json(b'{"a": [1e999]}', 32))
    assert check_strict_json(b'{"a": 1e308, "b": -0.0}', 32) is None
    assert check_strict_json(b'{"a": "NaN"}', 32) is None
    assert check_strict_json(b"not json", 32) is None  # the route reports syntax
    assert split_host("[::1]:80") == ("[::1]", 80)
    assert split_host("Example.COM.") == ("example.com", None)
    for bad in ("", "a:b", "a:0", "a:70000", "[::1", "[::1]x", "u@h", "a/b"):
        assert split_host(bad) is None, bad


async def test_a_specific_listen_address_is_an_allowed_host(store: Store, tmp_path: Path) -> None:
    for listen, host in (
        ("192.0.2.7:8080", "192.0.2.7:8080"),
        ("[2001:db8::1]:80", "[2001:db8::1]"),
    ):
        app = create_app(store, make_settings(tmp_path, api_listen=listen), auth=make_auth())
        assert (await asgi(app, "GET", "/api/v1/dags", {**ADMIN, "Host": host})).status == 200
    app = create_app(store, make_settings(tmp_path, api_listen="0.0.0.0:8080"), auth=make_auth())
    assert (await asgi(app, "GET", "/api/v1/dags", {**ADMIN, "Host": "192.0.2.7"})).status == 400


async def test_an_app_mounted_later_is_guarded_too(store: Store, tmp_path: Path) -> None:
    """A web UI mounted at / after create_app gets the same checks without opting in."""
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def page(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ui")

    app = create_app(store, make_settings(tmp_path), auth=Auth.disabled())
    app.mount("/", Starlette(routes=[Route("/ui", page, methods=["GET", "POST"])]))
    assert (await asgi(app, "GET", "/ui", {"Host": HOST})).body == b"ui"
    assert (await asgi(app, "GET", "/ui", {"Host": "evil.example"})).status == 400
    form = {**body_headers("text/plain", 3), "Origin": "http://evil.example"}
    assert (await asgi(app, "POST", "/ui", form, [b"a=b"])).status == 403
    del form["Origin"]
    assert (await asgi(app, "POST", "/ui", form, [b"a=b"])).status == 415


async def test_a_websocket_gets_the_host_origin_and_token_checks(
    store: Store, tmp_path: Path
) -> None:
    app = create_app(store, make_settings(tmp_path), auth=make_auth())

    @app.websocket("/api/ws")
    async def echo(ws: WebSocket) -> None:
        await ws.accept()
        await ws.send_text("hello")
        await ws.close()

    async def open_ws(headers: dict[str, str]) -> list[MutableMapping[str, Any]]:
        scope = {
            "type": "websocket", "asgi": {"version": "3.0"}, "scheme": "ws", "path": "/api/ws",
            "raw_path": b"/api/ws", "query_string": b"", "root_path": "", "subprotocols": [],
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 40000),
        }  # fmt: skip
        inbox = [{"type": "websocket.connect"}]
        sent: list[MutableMapping[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return inbox.pop(0) if inbox else {"type": "websocket.disconnect", "code": 1000}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 30)
        return sent

    ok = await open_ws({**ADMIN, "Host": HOST, "Origin": f"http://{HOST}"})
    assert [m["type"] for m in ok][:2] == ["websocket.accept", "websocket.send"], ok
    for headers, why in (
        ({**ADMIN, "Host": "evil.example"}, "LEOFLOW_API_ALLOWED_HOSTS"),
        ({**ADMIN, "Host": HOST, "Origin": "http://evil.example"}, "LEOFLOW_API_ALLOWED_ORIGINS"),
        ({"Host": HOST, "Origin": f"http://{HOST}"}, "bearer token"),
    ):
        refused = await open_ws(headers)
        assert [m["type"] for m in refused] == ["websocket.close"], headers
        assert refused[0]["code"] == 1008 and why in refused[0]["reason"]


def test_malformed_allowed_hosts_and_origins_are_setting_errors(tmp_path: Path) -> None:
    from leoflow.settings import SettingsError, load_settings

    for name, value in (
        ("api_allowed_hosts", "http://leoflow.example"),
        ("api_allowed_hosts", "a:b"),
        ("api_allowed_origins", "leoflow.example"),
        ("api_allowed_origins", "https://ui.example/path"),
    ):
        with pytest.raises(SettingsError, match=f"LEOFLOW_{name.upper()}") as info:
            load_settings(None, home=tmp_path, **{name: value})
        assert value in str(info.value)
    s = load_settings(home=tmp_path, api_allowed_hosts="a.example, .b.example,[::2]:81")
    assert s.api_allowed_hosts == ("a.example", ".b.example", "[::2]:81")
