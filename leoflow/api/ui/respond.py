"""What every web UI route answers with: the security headers, the session cookie
when the request made one, a page's context, and server-sent event streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from leoflow.api.context import ApiContext
from leoflow.api.live_streams import Ticket
from leoflow.api.lookup import spec_of
from leoflow.api.ui import pages, session
from leoflow.api.ui.present import Viewer

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def ctx_of(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.leoflow
    return ctx


def finish(request: Request, response: Response, s: session.Session | None) -> Response:
    if s is not None and s.fresh:
        session.set_cookie(request, response, ctx_of(request), s)
    response.headers.update(_SECURITY_HEADERS)
    return response


async def page_context(
    ctx: ApiContext, s: session.Session, page: pages.Page, args: list[str], query: dict[str, str]
) -> dict[str, Any]:
    """The page's template context, with who is looking (``me``) and the time."""
    context = await page.build(ctx, s, args, query)
    context.update(
        me=Viewer(s.principal, s.csrf, ctx.auth.enabled),
        page_name=page.name,
        now=ctx.clock(),
        dag_tz=await _dag_zone(ctx, page, args, context),
    )
    return context


async def _dag_zone(
    ctx: ApiContext, page: pages.Page, args: list[str], context: dict[str, Any]
) -> str | None:
    """The zone of the DAG a page is about: what "the DAG's zone" shows dates in."""
    spec = context.get("spec")
    if spec is None and args and page.name in pages.ONE_DAG_PAGES:
        row = await ctx.store.get_dag(args[0])
        spec = spec_of(row) if row is not None else None
    zone = getattr(spec, "timezone", None)
    return zone if isinstance(zone, str) else None


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def event_stream(
    request: Request,
    stream: AsyncIterator[bytes],
    s: session.Session | None,
    ticket: Ticket | None = None,
) -> Response:
    """``stream`` as server-sent events; ``ticket``, its place among the live streams,
    is freed when the response ends, even if the stream never started."""
    response = StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        background=None
        if ticket is None
        else BackgroundTask(ctx_of(request).streams.release, ticket),
    )
    return finish(request, response, s)


def too_many_streams(request: Request, s: session.Session | None) -> Response:
    """The answer when the live streams' total bound is reached: the page retries."""
    response = JSONResponse(
        {"detail": ctx_of(request).streams.refusal()},
        status_code=503,
        headers={"Retry-After": "5", "Cache-Control": "no-store"},
    )
    return finish(request, response, s)


def ended(ticket: Ticket) -> bytes:
    """The event that tells the browser why its stream ends: ``superseded`` (a newer
    stream of its session took the place: stay closed) or ``closing`` (the server
    stops: reconnect)."""
    return sse(ticket.why or "closing", {})
