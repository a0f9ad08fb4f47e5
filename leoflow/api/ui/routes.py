"""HTTP routes of the web UI: pages, static assets, live events, logs, actions.

Every action calls the API's own route functions with the session's principal,
after the UI's checks (same origin, JSON, CSRF, role); their 404/409 answers
come back as they are.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from leoflow.api import dags as dags_api
from leoflow.api import pools as pools_api
from leoflow.api import runs as runs_api
from leoflow.api import tasks as tasks_api
from leoflow.api.auth import Role
from leoflow.api.context import ApiContext
from leoflow.api.logs import try_is_over
from leoflow.api.lookup import task_or_404
from leoflow.api.schemas import RUN_ID_PATTERN, PoolIn, PoolPatch, TriggerIn
from leoflow.api.ui import pages, session
from leoflow.api.ui.ansi import AnsiRenderer, render_log
from leoflow.api.ui.present import Viewer

log = logging.getLogger("leoflow.api.ui")

router = APIRouter(include_in_schema=False)


LIVE_INTERVAL = 1.0
KEEPALIVE = 15.0
LOG_PAGE = 64 * 1024
MAX_ACTION_BODY = 64 * 1024
_STATIC = {
    "ui.css": "text/css; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _ctx(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.leoflow
    return ctx


def _finish(request: Request, response: Response, s: session.Session | None) -> Response:
    if s is not None and s.fresh:
        session.set_cookie(request, response, _ctx(request), s)
    response.headers.update(_SECURITY_HEADERS)
    return response


def _login_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


def _error_page(request: Request, s: session.Session | None, exc: HTTPException) -> Response:
    ctx = _ctx(request)
    me = Viewer(s.principal, s.csrf, ctx.auth.enabled) if s else None
    html = pages.ENV.get_template("error.html").render(
        me=me, status=exc.status_code, detail=exc.detail, page_name="error"
    )
    return _finish(request, HTMLResponse(html, status_code=exc.status_code), s)


async def _page(request: Request) -> Response:
    ctx = _ctx(request)
    s = session.current(request, ctx)
    if s is None:
        return _login_redirect(request)
    found = pages.resolve(request.url.path)
    if found is None:
        return _error_page(request, s, HTTPException(404, "no such page"))
    page, args = found
    try:
        context = await page.build(ctx, s, args, dict(request.query_params))
    except HTTPException as exc:
        return _error_page(request, s, exc)
    context.update(
        me=Viewer(s.principal, s.csrf, ctx.auth.enabled), page_name=page.name, now=ctx.clock()
    )
    response = HTMLResponse(pages.render_page(page, context))
    response.headers["Cache-Control"] = "no-store"
    return _finish(request, response, s)


for _path in (
    "/",
    "/waiting",
    "/pools",
    "/dags/{dag_id}",
    "/dags/{dag_id}/runs/{run_id}",
    "/dags/{dag_id}/runs/{run_id}/tasks/{task_id}",
):
    router.add_api_route(_path, _page, methods=["GET"], response_class=HTMLResponse)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/") -> Response:
    ctx = _ctx(request)
    if not ctx.auth.enabled:
        return RedirectResponse("/", status_code=303)
    html = pages.ENV.get_template("login.html").render(
        me=None, next=_safe_next(next), page_name="login"
    )
    return _finish(request, HTMLResponse(html), None)


def _safe_next(target: str) -> str:
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    if name not in _STATIC:
        raise HTTPException(404, "no such asset")
    data = resources.files("leoflow.api.ui").joinpath("static", name).read_bytes()
    return Response(
        data,
        media_type=_STATIC[name],
        headers={"Cache-Control": "no-cache", "ETag": hashlib.sha256(data).hexdigest()[:16]},
    )


# ---------------------------------------------------------------------------- live


def _sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _live_payload(
    ctx: ApiContext, s: session.Session, page: pages.Page, args: list[str], query: dict[str, str]
) -> dict[str, Any]:
    context = await page.build(ctx, s, args, query)
    context.update(
        me=Viewer(s.principal, s.csrf, ctx.auth.enabled), page_name=page.name, now=ctx.clock()
    )
    payload: dict[str, Any] = {"regions": pages.render_regions(page, context)}
    if page.name == "dag":
        payload["nodes"] = {t: st.value for t, st in context["selected_states"].items()}
        selected = context["selected"]
        payload["run"] = None if selected is None else selected.run_id
    if page.name == "task":
        payload["log_live"] = context["log_live"]
        payload["latest_try"] = context["ti"].try_number
    return payload


@router.get("/ui/events")
async def events(request: Request, path: Annotated[str, Query(max_length=2000)] = "/") -> Response:
    """Server-sent events for the page at ``path``: its regions whenever they change."""
    ctx = _ctx(request)
    s = session.current(request, ctx)
    parts = urlsplit(path)
    found = pages.resolve(parts.path)
    if found is None:
        raise HTTPException(404, "no such page")
    page, args = found
    query = dict(_parse_qs(parts.query))

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 1500\n\n"
        if s is None:
            yield _sse("login", {"url": "/login"})
            return
        yield _sse("hello", {"csrf": s.csrf, "user": s.principal.name})
        last = ""
        quiet = 0.0
        while True:
            if await request.is_disconnected():
                return
            try:
                payload = await _live_payload(ctx, s, page, args, query)
            except HTTPException as exc:
                yield _sse("gone", {"status": exc.status_code, "detail": str(exc.detail)})
                return
            except Exception:  # a store hiccup: say so in the log, try again next tick
                log.exception("the web UI could not render %s", path)
                if await ctx.pause(LIVE_INTERVAL):
                    return
                continue
            digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
            if digest != last:
                last = digest
                quiet = 0.0
                yield _sse("update", payload)
            elif quiet >= KEEPALIVE:
                quiet = 0.0
                yield b": keepalive\n\n"
            if await ctx.pause(LIVE_INTERVAL):
                yield _sse("closing", {})  # the browser reconnects to the next server
                return
            quiet += LIVE_INTERVAL

    response = StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
    return _finish(request, response, s)


def _parse_qs(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(query, keep_blank_values=True)[:20]


# ---------------------------------------------------------------------------- logs


def _operator(request: Request) -> tuple[ApiContext, session.Session]:
    ctx = _ctx(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    session.require(s, Role.OPERATOR)
    return ctx, s


@router.get("/ui/log")
async def log_page(
    request: Request,
    dag: Annotated[str, Query(max_length=200)],
    run: Annotated[str, Query(max_length=250)],
    task: Annotated[str, Query(max_length=200)],
    try_: Annotated[int, Query(alias="try", ge=1, le=1_000_000)],
    before: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> Response:
    """The page of log that ends at ``before`` (default: the end), from a line start."""
    ctx, s = _operator(request)
    _, ti, _ = await task_or_404(ctx.store, dag, run, task)
    if try_ > ti.try_number:
        raise HTTPException(404, f"task {task!r} has no try {try_}")
    size = await ctx.store.log_size(ti.pk, try_)
    end = size if before is None else min(before, size)
    start = max(0, end - LOG_PAGE)
    data = await ctx.store.read_log(ti.pk, try_, offset=start, limit=end - start)
    if start > 0:
        # Start at a line: a page never begins inside a UTF-8 sequence or a colour code.
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            data, start = data[cut + 1 :], start + cut + 1
    return _finish(
        request,
        JSONResponse({"html": render_log(data), "start": start, "end": end, "size": size}),
        s,
    )


@router.get("/ui/log/stream")
async def log_stream(
    request: Request,
    dag: Annotated[str, Query(max_length=200)],
    run: Annotated[str, Query(max_length=250)],
    task: Annotated[str, Query(max_length=200)],
    try_: Annotated[int, Query(alias="try", ge=1, le=1_000_000)],
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
) -> Response:
    """Follow a try's log from ``offset`` (or the browser's Last-Event-ID after a
    reconnect) until the try is over; each event's id is the byte offset after it."""
    ctx, s = _operator(request)
    _, ti, _ = await task_or_404(ctx.store, dag, run, task)
    resume = request.headers.get("last-event-id", "")
    start = int(resume) if resume.isdigit() else offset
    store = ctx.store

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 1500\n\n"
        position = start
        renderer = AnsiRenderer()
        while True:
            if await request.is_disconnected():
                return
            over = try_is_over(await store.get_task_instance(ti.pk), try_)
            while True:
                data = await store.read_log(ti.pk, try_, offset=position, limit=LOG_PAGE)
                if not data:
                    break
                position += len(data)
                yield _sse("log", {"html": renderer.feed(data)}, str(position))
            if over:
                yield _sse("end", {"end": position}, str(position))
                return
            if await ctx.pause(ctx.log_poll_interval):
                yield _sse("closing", {})  # resumed from Last-Event-ID on reconnect
                return

    return _finish(
        request,
        StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        ),
        s,
    )


# -------------------------------------------------------------------------- actions


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dag_id: str | None = Field(None, max_length=200)
    run_id: str | None = Field(None, max_length=250)
    task_id: str | None = Field(None, max_length=200)
    downstream: bool = False
    conf: Any = None
    new_run_id: str | None = Field(None, pattern=RUN_ID_PATTERN)
    name: str | None = Field(None, max_length=200)
    slots: int | None = None
    description: str | None = None


async def _body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_ACTION_BODY:
        raise HTTPException(413, f"the request body is over {MAX_ACTION_BODY} bytes")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_ACTION_BODY:
            raise HTTPException(413, f"the request body is over {MAX_ACTION_BODY} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "the body must be a JSON object")
    return data


def _need(value: str | None, name: str) -> str:
    if not value:
        raise HTTPException(422, f"{name}: required")
    return value


@router.post("/ui/login")
async def login(request: Request) -> Response:
    ctx = _ctx(request)
    session.check_same_origin(request)
    body = await _body(request)
    token = body.get("token")
    if not isinstance(token, str) or not token or len(token) > 4096:
        raise HTTPException(422, "token: expected the API token as a string")
    s = session.login(ctx, token)
    if s is None:
        raise HTTPException(401, "unknown token")
    return _finish(
        request, JSONResponse({"user": s.principal.name, "role": s.principal.role.label}), s
    )


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    ctx = _ctx(request)
    session.check_same_origin(request)
    s = session.current(request, ctx)
    if s is not None and not s.fresh:
        session.check_csrf(request, s)
        session.logout(ctx, s)
    response = JSONResponse({"ok": True})
    session.clear_cookie(request, response)
    return response


@router.post("/ui/actions/{action}")
async def act(action: str, request: Request) -> Response:
    """One state-changing call. Checks, in order, before reading the body: same
    origin and JSON, a session, its CSRF token, the role the action needs."""
    ctx = _ctx(request)
    session.check_same_origin(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    if s.fresh:
        raise HTTPException(403, "missing or stale CSRF token: reload the page")
    session.check_csrf(request, s)
    role = Role.ADMIN if action.startswith("pool_") else Role.OPERATOR
    if action not in _ACTIONS:
        raise HTTPException(404, f"no action {action!r}")
    session.require(s, role)
    try:
        body = _Action.model_validate(await _body(request))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise HTTPException(422, problems) from None
    result = await _ACTIONS[action](ctx, s, body)
    return _finish(request, JSONResponse(result), None)


async def _pause(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await dags_api.pause_dag(_need(b.dag_id, "dag_id"), ctx, s.principal)
    return {"paused": out.paused}


async def _unpause(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await dags_api.unpause_dag(_need(b.dag_id, "dag_id"), ctx, s.principal)
    return {"paused": out.paused}


async def _trigger(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    conf = {} if b.conf is None else b.conf
    if not isinstance(conf, dict):
        raise HTTPException(
            422, f'conf: expected a JSON object such as {{"key": 1}}, got {type(conf).__name__}'
        )
    response = await runs_api.trigger_run(
        _need(b.dag_id, "dag_id"), ctx, s.principal, TriggerIn(conf=conf, run_id=b.new_run_id)
    )
    data: dict[str, Any] = json.loads(bytes(response.body))
    return {"run_id": data["run_id"], "state": data["state"]}


async def _cancel(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await runs_api.cancel_run(
        _need(b.dag_id, "dag_id"), _need(b.run_id, "run_id"), ctx, s.principal
    )
    return {"state": out.state.value}


async def _clear(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    out = await tasks_api.clear_task_instance(
        _need(b.dag_id, "dag_id"),
        _need(b.run_id, "run_id"),
        _need(b.task_id, "task_id"),
        ctx,
        s.principal,
        downstream=b.downstream,
    )
    return {"cleared": out.cleared}


async def _pool_create(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    try:
        body = PoolIn(
            name=_need(b.name, "name"), slots=b.slots or 0, description=b.description or ""
        )
    except ValidationError as exc:
        raise HTTPException(422, str(exc.errors()[0]["msg"])) from None
    out = await pools_api.create_pool(body, ctx, s.principal)
    return {"name": out.name, "slots": out.slots}


async def _pool_resize(ctx: ApiContext, s: session.Session, b: _Action) -> dict[str, Any]:
    try:
        body = PoolPatch(slots=b.slots)
    except ValidationError as exc:
        raise HTTPException(422, "slots: " + str(exc.errors()[0]["msg"])) from None
    out = await pools_api.resize_pool(_need(b.name, "name"), body, ctx, s.principal)
    return {"name": out.name, "slots": out.slots}


_ACTIONS = {
    "pause": _pause,
    "unpause": _unpause,
    "trigger": _trigger,
    "cancel": _cancel,
    "clear": _clear,
    "pool_create": _pool_create,
    "pool_resize": _pool_resize,
}
