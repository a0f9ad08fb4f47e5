"""The web UI's live updates: ``/ui/events`` streams a page's regions again
whenever they change, as server-sent events, until the client goes or the server
stops (then a ``closing`` event; the browser reconnects by itself). Streams are
bounded (``leoflow/api/live_streams.py``): a session's oldest gives way to its newest
(a ``superseded`` event: that tab stays still), and past the total a new one is 503."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from leoflow.api.context import ApiContext
from leoflow.api.ui import pages, session
from leoflow.api.ui.respond import (
    ctx_of,
    ended,
    event_stream,
    page_context,
    sse,
    too_many_streams,
)
from leoflow.domain.cancelled import CANCELLED
from leoflow.domain.mapped_states import fold_items, with_items_folded

log = logging.getLogger("leoflow.api.ui")

router = APIRouter(include_in_schema=False)

KEEPALIVE = 15.0


async def _live_payload(
    ctx: ApiContext, s: session.Session, page: pages.Page, args: list[str], query: dict[str, str]
) -> dict[str, Any]:
    context = await page_context(ctx, s, page, args, query)
    payload: dict[str, Any] = {"regions": pages.render_regions(page, context)}
    if page.name == "dag":
        states, mapped = context["selected_states"], context["mapped"]
        gone = context["selected_cancelled"]  # failed by a cancel: shown as cancelled
        payload["nodes"] = {
            t: CANCELLED if t in gone else st.value
            for t, st in with_items_folded(states, mapped).items()
        }
        payload["mapped"] = {t: items.words() for t, items in fold_items(states, mapped).items()}
        selected = context["selected"]
        payload["run"] = None if selected is None else selected.run_id
    if page.name == "task":
        payload["log_live"] = context["log_live"]
        payload["latest_try"] = context["ti"].try_number
    return payload


@router.get("/ui/events")
async def events(request: Request, path: Annotated[str, Query(max_length=2000)] = "/") -> Response:
    """Server-sent events for the page at ``path``: its regions whenever they change."""
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
            last = ""
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
                if payload is not None:
                    text = json.dumps(payload, sort_keys=True).encode()
                    digest = hashlib.sha256(text).hexdigest()
                    if digest != last:
                        last = digest
                        quiet = 0.0
                        yield sse("update", payload)
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
