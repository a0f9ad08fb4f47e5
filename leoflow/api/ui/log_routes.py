"""A try's log in the web UI, in numbered lines (``log_html``): a page of it before
or after a byte offset or around a line (``/ui/log``), the rest followed live
(``/ui/log/stream``) until the try is over, a search inside it on the server
(``/ui/log/search``) and the whole of it as a file (``/ui/log/download``). Every
logged-in role may read logs: they are stored masked, as every role sees them."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from leoflow.api.auth import Role
from leoflow.api.context import ApiContext
from leoflow.api.log_lines import Read
from leoflow.api.log_search import check_needle, log_of, search_log
from leoflow.api.logs import READ_CHUNK, try_is_over
from leoflow.api.ui import session
from leoflow.api.ui.ansi import AnsiRenderer, render_log
from leoflow.api.ui.log_html import (
    PAGE,
    Slice,
    page_after,
    page_at_line,
    page_before,
    render_lines,
)
from leoflow.api.ui.respond import ctx_of, ended, event_stream, finish, sse, too_many_streams
from leoflow.store.rows import TaskInstanceRow

router = APIRouter(include_in_schema=False)

SEARCH_HITS = 200
# A line longer than this is streamed in pieces rather than held back whole.
LONGEST_HELD = 1024 * 1024
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _reader(request: Request) -> tuple[ApiContext, session.Session]:
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    session.require(s, Role.VIEWER)
    return ctx, s


@dataclass(frozen=True)
class _Try:
    dag: str
    run: str
    task: str
    number: int


def _try_of(
    dag: Annotated[str, Query(max_length=200)],
    run: Annotated[str, Query(max_length=250)],
    task: Annotated[str, Query(max_length=200)],
    try_: Annotated[int, Query(alias="try", ge=1, le=1_000_000)],
) -> _Try:
    return _Try(dag, run, task, try_)


TryOf = Annotated[_Try, Depends(_try_of)]
Offset = Annotated[int | None, Query(ge=0, le=2**53)]


def _read_of(ctx: ApiContext, ti: TaskInstanceRow, try_number: int) -> Read:
    async def read(offset: int, length: int) -> bytes:
        return await ctx.store.read_log(ti.pk, try_number, offset=offset, limit=length)

    return read


@router.get("/ui/log")
async def log_page(
    request: Request,
    which: TryOf,
    before: Offset = None,
    after: Offset = None,
    line: Annotated[int | None, Query(ge=1, le=2**53)] = None,
) -> Response:
    """The page of log that ends at ``before`` (default: the end), starts at ``after``,
    or holds line ``line``; in whole lines, numbered."""
    ctx, s = _reader(request)
    ti = await log_of(ctx, which.dag, which.run, which.task, which.number)
    size = await ctx.store.log_size(ti.pk, which.number)
    over = try_is_over(ti, which.number)
    read = _read_of(ctx, ti, which.number)
    page: Slice | None
    if line is not None:
        page = await page_at_line(read, size, line, over)
        if page is None:
            raise HTTPException(404, f"the log of try {which.number} has no line {line}")
    elif after is not None:
        page = await page_after(read, size, after, over)
    else:
        page = await page_before(read, size, before, over)
    body = {
        "html": render_lines(page.data, page.first_line),
        "start": page.start,
        "end": page.end,
        "size": size,
        "first_line": page.first_line,
        "next_line": page.first_line + page.data.count(b"\n"),
    }
    return finish(request, JSONResponse(body), s)


@router.get("/ui/log/search")
async def log_search(
    request: Request,
    which: TryOf,
    q: Annotated[str, Query()],
    case: bool = False,
) -> Response:
    """The lines that hold ``q``, as a list of links to them (at most SEARCH_HITS)."""
    ctx, s = _reader(request)
    needle = check_needle(q)
    ti = await log_of(ctx, which.dag, which.run, which.task, which.number)
    size, found = await search_log(ctx, ti, which.number, needle, SEARCH_HITS, not case)
    items = "".join(
        f'<li><a href="#L{m.line}" data-line="{m.line}">{m.line}</a> '
        f"<code>{render_log(m.text)}</code></li>"
        for m in found.matches
    )
    n = len(found.matches)
    words = (
        f"No line holds “{html.escape(q)}”."
        if n == 0
        else f"{'The first ' if found.truncated else ''}{n} line{'s' if n != 1 else ''} "
        f"hold{'s' if n == 1 else ''} “{html.escape(q)}”"
        + (" (more do; search for something longer)." if found.truncated else ".")
    )
    body = {"html": items, "count": n, "truncated": found.truncated, "words": words, "size": size}
    return finish(request, JSONResponse(body), s)


@router.get("/ui/log/download")
async def log_download(request: Request, which: TryOf) -> Response:
    """The try's whole log, byte for byte, as a file."""
    ctx, s = _reader(request)
    ti = await log_of(ctx, which.dag, which.run, which.task, which.number)
    size = await ctx.store.log_size(ti.pk, which.number)
    read = _read_of(ctx, ti, which.number)

    async def chunks() -> AsyncIterator[bytes]:
        offset = 0
        while offset < size:
            data = await read(offset, min(READ_CHUNK, size - offset))
            if not data:
                return
            offset += len(data)
            yield data

    name = _UNSAFE_NAME.sub("_", f"{which.dag}.{which.run}.{which.task}.try{which.number}.log")
    response = StreamingResponse(
        chunks(),
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Length": str(size),
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
        },
    )
    return finish(request, response, s)


def _resume(header: str) -> tuple[int, int] | None:
    """``offset:line`` from a Last-Event-ID, ASCII digits only ("²" is a digit to
    isdigit() but not to int())."""
    offset, _, line = header.partition(":")
    if not all(p.isascii() and p.isdigit() and len(p) < 16 for p in (offset, line)):
        return None
    return int(offset), max(1, int(line))


@router.get("/ui/log/stream")
async def log_stream(
    request: Request,
    which: TryOf,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    line: Annotated[int, Query(ge=1, le=2**53)] = 1,
) -> Response:
    """Follow a try's log from ``offset`` (line ``line``), or from the browser's
    Last-Event-ID after a reconnect, until the try is over. Events hold whole lines
    (the last one once the try is over); each id is ``offset:line`` after it."""
    ctx, s = _reader(request)
    ti = await log_of(ctx, which.dag, which.run, which.task, which.number)
    try_ = which.number
    position, number = _resume(request.headers.get("last-event-id", "")) or (offset, line)
    store = ctx.store
    ticket = ctx.streams.open(s.sid)
    if ticket is None:
        return too_many_streams(request, s)

    async def stream() -> AsyncIterator[bytes]:
        nonlocal position, number
        try:
            yield b"retry: 1500\n\n"
            held = b""  # an unended last line, sent once it ends
            renderer = AnsiRenderer()
            while not await request.is_disconnected():
                over = try_is_over(await store.get_task_instance(ti.pk), try_)
                while True:
                    more = await store.read_log(
                        ti.pk, try_, offset=position + len(held), limit=PAGE
                    )
                    if not more:
                        data, held = (held, b"") if over else (b"", held)
                    else:
                        data, held = held + more, b""
                        cut = data.rfind(b"\n") + 1
                        if cut == 0 and len(data) < LONGEST_HELD:
                            data, held = b"", data
                            continue
                        if cut:
                            data, held = data[:cut], data[cut:]
                    if not data:
                        break
                    html_ = render_lines(data, number, renderer)
                    position += len(data)
                    number += data.count(b"\n")
                    yield sse("log", {"html": html_}, f"{position}:{number}")
                if over and not held:
                    yield sse("end", {"end": position}, f"{position}:{number}")
                    return
                if await ticket.pause(ctx.log_poll_interval):
                    yield ended(ticket)  # closing: resumed from Last-Event-ID on reconnect
                    return
        finally:
            ctx.streams.release(ticket)

    return event_stream(request, stream(), s, ticket)
