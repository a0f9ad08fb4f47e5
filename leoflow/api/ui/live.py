"""The web UI's live updates: ``/ui/events`` streams a page's regions again
whenever they change, as server-sent events, until the client goes or the server
stops (then a ``closing`` event; the browser reconnects by itself). Streams are
bounded (``leoflow/api/live_streams.py``): a session's oldest gives way to its newest
(a ``superseded`` event: that tab stays still), and past the total a new one is 503."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from leoflow.api.context import ApiContext
from leoflow.api.ui import pages, session
from leoflow.api.ui.live_delta import Sent, full_payload, parse_known
from leoflow.api.ui.respond import (
    ctx_of,
    ended,
    event_stream,
    page_context,
    sse,
    too_many_streams,
)

log = logging.getLogger("leoflow.api.ui")

router = APIRouter(include_in_schema=False)

KEEPALIVE = 15.0


async def _live_payload(
    ctx: ApiContext, s: session.Session, page: pages.Page, args: list[str], query: dict[str, str]
) -> dict[str, Any]:
    return full_payload(page, await page_context(ctx, s, page, args, query))


@router.get("/ui/events")
async def events(
    request: Request,
    path: Annotated[str, Query(max_length=2000)] = "/",
    known: Annotated[str, Query(max_length=2000)] = "",
) -> Response:
    """Server-sent events for the page at ``path``: what changed, whenever it does.
    ``known``: the digests of what the browser holds (``live_delta``)."""
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    parts = urlsplit(path)
    found = pages.resolve(parts.path)
    if found is None:
        raise HTTPException(404, "no such page")
    page, args = found
    query = dict(_parse_qs(parts.query))

    if s is None:
        return event_stream(request, _to_login(), s)
    ticket = ctx.streams.open(s.sid)
    if ticket is None:
        return too_many_streams(request, s)

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 1500\n\n"
            yield sse("hello", {"csrf": s.csrf, "user": s.principal.name})
            sent = Sent(digests=parse_known(known))
            quiet = 0.0
            while not await request.is_disconnected():
                try:
                    payload = await _live_payload(ctx, s, page, args, query)
                except HTTPException as exc:
                    yield sse("gone", {"status": exc.status_code, "detail": str(exc.detail)})
                    return
                except Exception:  # a store hiccup: say so in the log, try again next tick
                    log.exception("the web UI could not render %s", path)
                    payload = None
                update = sent.delta(payload) if payload is not None else None
                if update is not None:
                    quiet = 0.0
                    yield sse("update", update)
                elif quiet >= KEEPALIVE:
                    quiet = 0.0
                    yield b": keepalive\n\n"
                # Many streams open: each ticks less often (the shared render budget).
                interval = ctx.streams.interval()
                if await ticket.pause(interval):
                    yield ended(ticket)
                    return
                quiet += interval
        finally:
            ctx.streams.release(ticket)

    return event_stream(request, stream(), s, ticket)


async def _to_login() -> AsyncIterator[bytes]:
    yield b"retry: 1500\n\n"
    yield sse("login", {"url": "/login"})


def _parse_qs(query: str) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True)[:20]
