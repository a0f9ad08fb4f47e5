"""The web UI's live updates: ``/ui/events`` streams a page's regions again
whenever they change, as server-sent events, until the client goes or the server
stops (then a ``closing`` event; the browser reconnects by itself)."""

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
from leoflow.api.ui.respond import ctx_of, event_stream, page_context, sse
from leoflow.domain.mapped_states import fold_items, with_items_folded

log = logging.getLogger("leoflow.api.ui")

router = APIRouter(include_in_schema=False)

LIVE_INTERVAL = 1.0
KEEPALIVE = 15.0


async def _live_payload(
    ctx: ApiContext, s: session.Session, page: pages.Page, args: list[str], query: dict[str, str]
) -> dict[str, Any]:
    context = await page_context(ctx, s, page, args, query)
    payload: dict[str, Any] = {"regions": pages.render_regions(page, context)}
    if page.name == "dag":
        states, mapped = context["selected_states"], context["mapped"]
        payload["nodes"] = {t: st.value for t, st in with_items_folded(states, mapped).items()}
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

    async def stream() -> AsyncIterator[bytes]:
        yield b"retry: 1500\n\n"
        if s is None:
            yield sse("login", {"url": "/login"})
            return
        yield sse("hello", {"csrf": s.csrf, "user": s.principal.name})
        last = ""
        quiet = 0.0
        while True:
            if await request.is_disconnected():
                return
            try:
                payload = await _live_payload(ctx, s, page, args, query)
            except HTTPException as exc:
                yield sse("gone", {"status": exc.status_code, "detail": str(exc.detail)})
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
                yield sse("update", payload)
            elif quiet >= KEEPALIVE:
                quiet = 0.0
                yield b": keepalive\n\n"
            if await ctx.pause(LIVE_INTERVAL):
                yield sse("closing", {})  # the browser reconnects to the next server
                return
            quiet += LIVE_INTERVAL

    return event_stream(request, stream(), s)


def _parse_qs(query: str) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True)[:20]
