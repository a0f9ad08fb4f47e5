"""A try's log in the web UI: a page of it by byte range (``/ui/log``), and the rest
followed live (``/ui/log/stream``) until the try is over. Both need the operator role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response

from leoflow.api.auth import Role
from leoflow.api.context import ApiContext
from leoflow.api.logs import try_is_over
from leoflow.api.lookup import task_or_404
from leoflow.api.ui import session
from leoflow.api.ui.ansi import AnsiRenderer, render_log
from leoflow.api.ui.respond import (
    ctx_of,
    ended,
    event_stream,
    finish,
    sse,
    too_many_streams,
)

router = APIRouter(include_in_schema=False)

LOG_PAGE = 64 * 1024


def _operator(request: Request) -> tuple[ApiContext, session.Session]:
    ctx = ctx_of(request)
    s = session.current(request, ctx)
    if s is None:
        raise HTTPException(401, "log in first")
    session.require(s, Role.OPERATOR)
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


@router.get("/ui/log")
async def log_page(
    request: Request,
    which: TryOf,
    before: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> Response:
    """The page of log that ends at ``before`` (default: the end), from a line start."""
    ctx, s = _operator(request)
    _, ti, _ = await task_or_404(ctx.store, which.dag, which.run, which.task)
    try_ = which.number
    if try_ > ti.try_number:
        raise HTTPException(404, f"task {which.task!r} has no try {try_}")
    size = await ctx.store.log_size(ti.pk, try_)
    end = size if before is None else min(before, size)
    start = max(0, end - LOG_PAGE)
    data = await ctx.store.read_log(ti.pk, try_, offset=start, limit=end - start)
    if start > 0:
        # Start at a line: a page never begins inside a UTF-8 sequence or a colour code.
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            data, start = data[cut + 1 :], start + cut + 1
    return finish(
        request,
        JSONResponse({"html": render_log(data), "start": start, "end": end, "size": size}),
        s,
    )


@router.get("/ui/log/stream")
async def log_stream(
    request: Request,
    which: TryOf,
    offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
) -> Response:
    """Follow a try's log from ``offset`` (or the browser's Last-Event-ID after a
    reconnect) until the try is over; each event's id is the byte offset after it."""
    ctx, s = _operator(request)
    _, ti, _ = await task_or_404(ctx.store, which.dag, which.run, which.task)
    try_ = which.number
    resume = request.headers.get("last-event-id", "")
    # ASCII digits only: "²" is a digit to isdigit() but not to int().
    start = int(resume) if resume.isascii() and resume.isdigit() and len(resume) < 16 else offset
    store = ctx.store
    ticket = ctx.streams.open(s.sid)
    if ticket is None:
        return too_many_streams(request, s)

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 1500\n\n"
            position = start
            renderer = AnsiRenderer()
            while not await request.is_disconnected():
                over = try_is_over(await store.get_task_instance(ti.pk), try_)
                while True:
                    data = await store.read_log(ti.pk, try_, offset=position, limit=LOG_PAGE)
                    if not data:
                        break
                    position += len(data)
                    yield sse("log", {"html": renderer.feed(data)}, str(position))
                if over:
                    yield sse("end", {"end": position}, str(position))
                    return
                if await ticket.pause(ctx.log_poll_interval):
                    yield ended(ticket)  # closing: resumed from Last-Event-ID on reconnect
                    return
        finally:
            ctx.streams.release(ticket)

    return event_stream(request, stream(), s, ticket)
