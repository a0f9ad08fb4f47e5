"""Task logs by try: whole, a byte range (206), or followed until the try ends.

Ranges: ``Range: bytes=A-B`` / ``bytes=A-`` / ``bytes=-N`` (one range; a malformed
header is ignored, as RFC 9110 allows), or ``?offset=&limit=``; the header wins when
both are given. Either answers 206 with ``Content-Range``; a range that starts at or
beyond the end answers 416 with ``Content-Range: bytes */SIZE``. Every answer
carries ``X-Log-Size``. ``?follow=true`` streams from ``offset`` until the try is
over (the task instance moved past it or is no longer queued/running on it).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Path, Query
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from leoflow.api.auth import Viewer
from leoflow.api.context import ApiContext, Ctx
from leoflow.api.live_streams import Ticket
from leoflow.api.lookup import task_or_404
from leoflow.api.schemas import ErrorOut
from leoflow.domain.states import TaskState
from leoflow.store.rows import TaskInstanceRow

router = APIRouter(prefix="/api/v1/dags/{dag_id}/runs/{run_id}/tasks", tags=["logs"])

READ_CHUNK = 1024 * 1024
MEDIA_TYPE = "text/plain; charset=utf-8"
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
_ACTIVE = frozenset({TaskState.QUEUED, TaskState.RUNNING})


def parse_range(header: str | None, size: int) -> tuple[int, int | None] | None:
    """(offset, limit) of a single-range ``Range`` header; None if absent or malformed.

    ``limit`` None means to the end. Raises 416 for a range that cannot be satisfied.
    """
    if header is None:
        return None
    match = _RANGE.match(header)
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if not first:  # suffix: the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            raise _unsatisfiable(size)
        return max(0, size - n), None
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise _unsatisfiable(size)
    return start, (int(last) - start + 1) if last else None


def _unsatisfiable(size: int) -> HTTPException:
    return HTTPException(
        416,
        f"the range starts at or past the end of the log ({size} bytes)",
        headers={"Content-Range": f"bytes */{size}", "X-Log-Size": str(size)},
    )


def try_is_over(ti: TaskInstanceRow | None, try_number: int) -> bool:
    """Will the log of ``try_number`` get no more bytes?"""
    if ti is None or ti.try_number != try_number:
        return True
    return ti.state not in _ACTIVE


async def _follow(
    ctx: ApiContext, ticket: Ticket, ti_pk: int, try_number: int, offset: int
) -> AsyncIterator[bytes]:
    store = ctx.store
    try:
        while True:
            # Read the state first: bytes written before the try ended are all read below.
            over = try_is_over(await store.get_task_instance(ti_pk), try_number)
            while True:
                data = await store.read_log(ti_pk, try_number, offset=offset, limit=READ_CHUNK)
                if not data:
                    break
                offset += len(data)
                yield data
            if over or await ticket.pause(ctx.log_poll_interval):
                return
    finally:
        ctx.streams.release(ticket)


async def _chunks(
    ctx: ApiContext, ti_pk: int, try_number: int, start: int, end: int
) -> AsyncIterator[bytes]:
    offset = start
    while offset < end:
        data = await ctx.store.read_log(
            ti_pk, try_number, offset=offset, limit=min(READ_CHUNK, end - offset)
        )
        if not data:
            return
        offset += len(data)
        yield data


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {MEDIA_TYPE: {"schema": {"type": "string"}}}, "description": "the log"},
    206: {"content": {MEDIA_TYPE: {"schema": {"type": "string"}}}, "description": "a range"},
    404: {"model": ErrorOut},
    416: {"model": ErrorOut},
}


@router.get(
    "/{task_id}/logs/{try_number}",
    response_class=Response,
    responses=_RESPONSES,
    summary="A try's log: whole, a byte range, or followed",
)
async def get_log(
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: Annotated[int, Path(ge=1, le=1_000_000)],
    ctx: Ctx,
    who: Viewer,
    offset: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    limit: Annotated[int | None, Query(ge=1, le=2**53)] = None,
    follow: Annotated[bool, Query(description="stream until the try is over")] = False,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> Response:
    _, ti, _ = await task_or_404(ctx.store, dag_id, run_id, task_id)
    if try_number > ti.try_number:
        raise HTTPException(
            404,
            f"task {task_id!r} has no try {try_number} (it has had {ti.try_number})",
        )
    if follow:
        # A followed log is a live stream like the web UI's: within their total bound
        # (its own key: a token is no browser session whose oldest tab may give way).
        ticket = ctx.streams.open(f"follow:{secrets.token_hex(8)}")
        if ticket is None:
            raise HTTPException(503, ctx.streams.refusal(), headers={"Retry-After": "5"})
        return StreamingResponse(
            _follow(ctx, ticket, ti.pk, try_number, offset or 0),
            media_type=MEDIA_TYPE,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            background=BackgroundTask(ctx.streams.release, ticket),
        )
    size = await ctx.store.log_size(ti.pk, try_number)
    ranged = parse_range(range_header, size)
    if ranged is None and (offset is not None or limit is not None):
        ranged = (offset or 0, limit)
        if ranged[0] >= size:
            raise _unsatisfiable(size)
    headers = {"X-Log-Size": str(size), "Accept-Ranges": "bytes"}
    if ranged is None:
        return StreamingResponse(
            _chunks(ctx, ti.pk, try_number, 0, size),
            media_type=MEDIA_TYPE,
            headers={**headers, "Content-Length": str(size)},
        )
    start, length = ranged
    end = size if length is None else min(size, start + length)
    data = await ctx.store.read_log(ti.pk, try_number, offset=start, limit=end - start)
    headers["Content-Range"] = f"bytes {start}-{start + len(data) - 1}/{size}"
    return Response(data, status_code=206, media_type=MEDIA_TYPE, headers=headers)
