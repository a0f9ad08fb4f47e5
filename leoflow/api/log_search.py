"""Search inside a try's log on the server: the matching lines with their numbers
and offsets, at most ``limit`` of them, read in blocks (``log_lines``).

``GET /api/v1/dags/{dag}/runs/{run}/tasks/{task}/logs/{try}/search?q=&limit=&case=``
(viewer). A missing run, task or try is 404 saying which, and that a pruned run
takes its logs with it; a try that is over with an empty log is 404 too, since
nothing will ever match (its chunks were deleted, or it wrote nothing).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from leoflow.api.auth import Viewer
from leoflow.api.context import ApiContext, Ctx
from leoflow.api.log_lines import SHOWN_BYTES, Found, search
from leoflow.api.logs import try_is_over
from leoflow.api.lookup import task_or_404
from leoflow.api.schemas import ErrorOut, UnprocessableOut
from leoflow.store.rows import TaskInstanceRow

router = APIRouter(prefix="/api/v1/dags/{dag_id}/runs/{run_id}/tasks", tags=["logs"])

MAX_MATCHES = 1000
NEEDLE_CHARS = 200


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class LogMatch(_Out):
    line: int = Field(description="1-based line number")
    offset: int = Field(description="byte offset where the line starts")
    text: str = Field(description=f"the line, at most {SHOWN_BYTES} bytes of it")


class LogSearchOut(_Out):
    query: str
    size: int = Field(description="the log's size in bytes when searched")
    matches: list[LogMatch]
    truncated: bool = Field(description="more lines match than were listed")


def check_needle(q: str) -> bytes:
    """The search string as bytes; 422 naming what is wrong with it."""
    if not q.strip():
        raise HTTPException(422, "query parameter 'q': expected text to search for")
    if len(q) > NEEDLE_CHARS:
        raise HTTPException(422, f"query parameter 'q': at most {NEEDLE_CHARS} characters")
    if any(c in q for c in "\r\n\x00"):
        raise HTTPException(422, "query parameter 'q': a line break cannot match within a line")
    return q.encode("utf-8", "surrogateescape")


async def log_of(
    ctx: ApiContext, dag_id: str, run_id: str, task_id: str, try_number: int
) -> TaskInstanceRow:
    """The task instance whose try ``try_number`` exists; 404 naming what is missing."""
    try:
        _, ti, _ = await task_or_404(ctx.store, dag_id, run_id, task_id)
    except HTTPException as exc:
        raise HTTPException(
            404, f"{exc.detail}; a pruned run's logs are deleted with it (leoflow db prune)"
        ) from None
    if try_number > ti.try_number:
        raise HTTPException(
            404, f"task {task_id!r} has no try {try_number} (it has had {ti.try_number})"
        )
    return ti


async def search_log(
    ctx: ApiContext, ti: TaskInstanceRow, try_number: int, needle: bytes, limit: int, fold: bool
) -> tuple[int, Found]:
    """(the log's size, what matched); 404 if the try is over and its log is empty."""
    store = ctx.store
    size = await store.log_size(ti.pk, try_number)
    if size == 0 and try_is_over(ti, try_number):
        raise HTTPException(
            404,
            f"try {try_number} of task {ti.task_id!r} has no log: it wrote nothing, "
            "or its log was deleted",
        )

    async def read(offset: int, length: int) -> bytes:
        return await store.read_log(ti.pk, try_number, offset=offset, limit=length)

    return size, await search(read, size, needle, limit=limit, fold=fold)


@router.get(
    "/{task_id}/logs/{try_number}/search",
    response_model=LogSearchOut,
    responses={404: {"model": ErrorOut}, 422: {"model": UnprocessableOut}},
    summary="Search a try's log: the matching lines, with their numbers",
)
async def search_try_log(
    q: Annotated[str, Query(description="text to find, within one line")],
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: Annotated[int, Path(ge=1, le=1_000_000)],
    who: Viewer,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=MAX_MATCHES)] = 200,
    case: Annotated[bool, Query(description="match case (default: ASCII case folded)")] = False,
) -> LogSearchOut:
    needle = check_needle(q)
    ti = await log_of(ctx, dag_id, run_id, task_id, try_number)
    size, found = await search_log(ctx, ti, try_number, needle, limit, not case)
    return LogSearchOut(
        query=q,
        size=size,
        matches=[
            LogMatch(line=m.line, offset=m.offset, text=m.text.decode("utf-8", "replace"))
            for m in found.matches
        ],
        truncated=found.truncated,
    )
