"""Input that no store can hold or response carry — a lone UTF-16 surrogate (the JSON
escape ``"\\ud800"``), NUL, percent-encoded bytes that are not UTF-8 — is refused at the
door on every route, naming the field; and a bad row already stored (an older
version's, or one written straight into the database) never fails a listing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.api.server import start_server
from leoflow.domain.stored_json import UNREADABLE, read_stored_json
from leoflow.store import Store
from tests.integration.api.conftest import (
    DAG_YAML,
    auth_header,
    make_auth,
    make_settings,
    put_dag,
)
from tests.integration.api.seed import seed
from tests.integration.api.test_cli import cli
from tests.integration.api.test_guard import (  # noqa: F401
    HOST,
    ROUTES,
    Answer,
    admin,
    asgi,
    body_headers,
    concrete,
    guarded,
    settings,
)

WRITE_ROUTES = [(m, t) for m, t in ROUTES if m in ("POST", "PUT", "PATCH") and t != "/api/v1/dags"]
# (body, the field path the refusal names): nested, in keys, at the top, in lists.
POISON = [
    (b'{"conf": {"x": "\\ud800"}}', "conf.x"),
    (b'{"conf": {"a": [1, {"b": "ok\\udfff"}]}}', "conf.a[1].b"),
    (b'{"description": "a\\u0000b"}', "description"),
    (b'{"conf": {"\\ud83d": 1}}', "conf"),
    (b'{"conf": {"k\\u0000": 1}}', "conf"),
    (b'{"note": "\\uDC00 upper-case hex"}', "note"),
    (b'["\\ud800"]', "[0]"),
    (b'"\\u0000"', "(the body)"),
    (b'{"weird key!": {"x": "\\ud800"}}', '["weird key!"].x'),
]


@pytest.mark.parametrize(
    ("method", "template"), WRITE_ROUTES, ids=[f"{m} {t}" for m, t in WRITE_ROUTES]
)
async def test_every_json_body_refuses_unstorable_text(
    guarded: FastAPI,  # noqa: F811
    store: Store,
    admin: dict[str, str],  # noqa: F811
    method: str,
    template: str,
) -> None:
    path = concrete(template)
    runs_before = len(await store.list_runs(dag_id="etl"))
    pools_before = await store.list_pools()
    for body, field in POISON:
        headers = {**admin, **body_headers("application/json", len(body))}
        answer = await asgi(guarded, method, path, headers, [body])
        assert answer.status == 400, (body, answer.status, answer.body)
        assert field in answer.detail, (body, answer.detail)
        assert "surrogate" in answer.detail or "NUL" in answer.detail
    assert len(await store.list_runs(dag_id="etl")) == runs_before
    assert await store.list_pools() == pools_before


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {t}" for m, t in ROUTES])
async def test_every_path_and_query_refuses_unstorable_text(
    guarded: FastAPI,  # noqa: F811
    admin: dict[str, str],  # noqa: F811
    method: str,
    template: str,
) -> None:
    path = concrete(template)
    for query, named in (
        (b"state=%00", '"state"'),
        (b"limit=1&q=a%00b", '"q"'),
        (b"x=%ED%A0%80", '"x"'),  # CESU-8 of U+D800: a server makes it U+FFFD silently
        (b"bad%FF=1", "name"),
    ):
        answer = await _asgi_query(guarded, method, path, query, {**admin, "Host": HOST})
        assert answer.status == 400, (query, answer.status, answer.body)
        assert named in answer.detail, answer.detail
    for poison in ("%00", "%ED%A0%80", "%FF"):
        answer = await asgi(guarded, method, path + poison, {**admin, "Host": HOST})
        assert answer.status == 400, (poison, answer.body)
        assert "path" in answer.detail


async def _asgi_query(
    app: FastAPI, method: str, path: str, query: bytes, headers: dict[str, str]
) -> Answer:
    # test_guard.asgi sends no query string; one is put into its scope on the way.
    async def with_query(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, "query_string": query}, receive, send)

    return await asgi(with_query, method, path, headers)  # type: ignore[arg-type]


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def test_poison_through_the_api_on_each_store(any_store: Store, tmp_path: Path) -> None:
    """The issue's cases, on SQLite and PostgreSQL (which refuses NUL itself): refused
    with the field, nothing stored, the listings keep answering."""
    await put_dag(any_store)
    app = create_app(any_store, make_settings(tmp_path), auth=make_auth())
    op = {**auth_header("admin"), "content-type": "application/json"}
    async with _client(app) as c:
        triggers: list[dict[str, object]] = [
            {"conf": {"x": "\ud800"}},
            {"conf": {"items": ["a", "\udbff"]}},  # a mapped task's items come from conf
            {"conf": {"x": "a\u0000b"}},
            {"run_id": "r\u0000"},
        ]
        for body in triggers:
            raw = json.dumps(body).encode()  # ensure_ascii: the "\ud800" escape on the wire
            answer = await c.post("/api/v1/dags/etl/runs", content=raw, headers=op)
            assert answer.status_code == 400, (raw, answer.text)
        pools: list[dict[str, object]] = [
            {"name": "p", "slots": 1, "description": "\ud800"},
            {"name": "p\u0000", "slots": 1},
        ]
        for body in pools:
            raw = json.dumps(body).encode()
            answer = await c.post("/api/v1/pools", content=raw, headers=op)
            assert answer.status_code == 400, (raw, answer.text)
        answer = await c.patch("/api/v1/pools/p", content=b'{"description": "\\ud800"}', headers=op)
        assert answer.status_code == 400, answer.text
        # A DAG document (YAML) with the same escapes: a 422 naming the place, not a 500.
        for poison in ('"\\ud800"', '"\\U0000DFFF"', '"a\\0b"', '"a\\x00"'):
            text = DAG_YAML.replace("echo load", poison)
            answer = await c.post(
                "/api/v1/dags", content=text.encode(),
                headers={**auth_header("admin"), "content-type": "application/yaml"},
            )  # fmt: skip
            assert answer.status_code == 422, (poison, answer.text)
            assert answer.json()["detail"]["problems"][0]["line"] is not None
        assert await any_store.list_runs(dag_id="etl") == []
        assert [p.name for p in await any_store.list_pools()] == []
        for url in ("/api/v1/dags/etl/runs", "/api/v1/pools", "/api/v1/dags", "/dags/etl"):
            answer = await c.get(url, headers=auth_header("admin"))
            assert answer.status_code in (200, 303), (url, answer.text)
        answer = await c.get("/api/v1/dags/e%00tl/runs", headers=auth_header("admin"))
        assert answer.status_code == 400  # PostgreSQL would refuse the NUL with a 500


async def test_a_bad_row_already_stored_is_shown_marked(any_store: Store, tmp_path: Path) -> None:
    """Rows an older version wrote (a lone surrogate kept as a JSON escape) or that were
    written straight into the database (conf that is not JSON): every listing answers,
    shows the good runs, and marks the bad ones."""
    await put_dag(any_store)
    good = await any_store.create_run(
        "etl", "good", run_type="manual", logical_date=None, conf={"ok": "é"}, tasks=[], epoch=None
    )
    await any_store.create_run(
        "etl", "old", run_type="manual", logical_date=None,
        conf={"x": "\ud800", "\udc00": ["\ud83d\ude00"]}, tasks=[], epoch=None,
    )  # fmt: skip
    await any_store.create_run(
        "etl", "raw", run_type="manual", logical_date=None, conf={}, tasks=[], epoch=None
    )
    await any_store._write(
        lambda conn: conn.exec_driver_sql(
            "UPDATE dag_runs SET conf = 'not {json' WHERE run_id = 'raw'"
        ),
        None,
    )
    app = create_app(any_store, make_settings(tmp_path), auth=make_auth())
    async with _client(app) as c:
        answer = await c.get("/api/v1/dags/etl/runs", headers=auth_header("viewer"))
        assert answer.status_code == 200, answer.text
        runs = {r["run_id"]: r["conf"] for r in answer.json()["runs"]}
        assert runs["good"] == {"ok": "é"}
        assert runs["old"] == {"x": "\ufffd", "\ufffd": ["\U0001f600"]}  # a pair stays
        assert UNREADABLE in runs["raw"]
        for url in (
            "/api/v1/runs", "/api/v1/dags/etl/runs/old", "/api/v1/dags/etl/runs/raw",
            "/dags/etl", "/dags/etl/runs/old", "/runs", "/",
        ):  # fmt: skip
            answer = await c.get(url, headers=auth_header("viewer"), follow_redirects=False)
            assert answer.status_code in (200, 303, 404), (url, answer.status_code)
            assert answer.status_code != 500
    assert good.conf == {"ok": "é"}


async def test_a_row_of_bytes_that_are_not_utf8_is_shown(store: Store, tmp_path: Path) -> None:
    """SQLite keeps any bytes a writer gives it; reading them must not fail the listing
    (the CLI included, against a real server)."""
    await put_dag(store)
    for run_id in ("fine", "bytes"):
        await store.create_run(
            "etl", run_id, run_type="manual", logical_date=None, conf={}, tasks=[], epoch=None
        )
    await store._write(
        lambda conn: conn.exec_driver_sql(
            "UPDATE dag_runs SET message = CAST(X'41FF42EDA080' AS TEXT), "
            "conf = CAST(X'7B2278223A22FF227D' AS TEXT) WHERE run_id = 'bytes'"
        ),
        None,
    )
    running = await start_server(
        create_app(store, make_settings(tmp_path), auth=make_auth()), "127.0.0.1", 0
    )
    try:
        async with httpx.AsyncClient(base_url=running.url) as c:
            answer = await c.get("/api/v1/dags/etl/runs", headers=auth_header("viewer"))
            assert answer.status_code == 200, answer.text
            by_id = {r["run_id"]: r for r in answer.json()["runs"]}
            assert by_id["bytes"]["message"].startswith("A\ufffdB")
            assert by_id["bytes"]["conf"] == {"x": "\ufffd"}
        code, out, err = await cli(running, "runs", "--dag", "etl", role="viewer")
        assert code == 0, err
        assert "fine" in out and "bytes" in out
    finally:
        await running.close()


def test_read_stored_json_edges() -> None:
    assert read_stored_json(None, "x") is None
    assert read_stored_json('"\\ud83d\\ude00"', "x") == "\U0001f600"
    assert read_stored_json('"\\ude00\\ud83d"', "x") == "\ufffd\ufffd"
    assert read_stored_json('{"a": "\\u0000"}', "x") == {"a": "\x00"}
    assert UNREADABLE in read_stored_json("[" * 100_000, "x")


async def test_digits_that_int_refuses_are_no_numbers(store: Store, tmp_path: Path) -> None:
    """ "²" is a digit to str.isdigit() but not to int(): in a header (Latin-1 as ASGI
    servers decode it) or a path, it is no number — never a 500."""
    await seed(store)
    app = create_app(store, make_settings(tmp_path), auth=Auth.disabled())

    def with_header(name: bytes, value: bytes, query: bytes = b"") -> ASGIApp:
        async def patched(scope: Scope, receive: Receive, send: Send) -> None:
            headers = [(k, v) for k, v in scope["headers"] if k != name]
            scope = {**scope, "headers": [*headers, (name, value)], "query_string": query}
            await app(scope, receive, send)

        return patched

    local = {"Host": HOST}
    log = b"dag=etl&run=r&task=extract&try=1"
    for value in (b"\xb2", b"1\xb3", b"9" * 40):
        follow = with_header(b"last-event-id", value, log)
        answer = await asgi(follow, "GET", "/ui/log/stream", local)  # type: ignore[arg-type]
        assert answer.status == 200, (value, answer.status, answer.body)
    answer = await asgi(
        with_header(b"content-length", b"\xb9"), "POST", "/api/v1/pools",  # type: ignore[arg-type]
        {**local, "Content-Type": "application/json"}, [b"{}"],
    )  # fmt: skip
    assert answer.status == 400 and "Content-Length" in answer.detail
    async with _client(app) as c:
        page = await c.get("/dags/etl/backfills/%C2%B2")
        assert page.status_code == 404, page.status_code
