"""Backfills: plan (dry run), create, follow and cancel a DAG's runs over a past range.

The API writes the backfill and its cron points in one transaction; the scheduler
makes the runs, at most ``max_active_runs`` of them queued or running at a time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BeforeValidator, Field, field_validator

from leoflow.api.auth import Operator, Viewer
from leoflow.api.context import Ctx
from leoflow.api.lookup import dag_or_404, spec_of
from leoflow.api.schemas import ErrorOut, RunOut, UnprocessableOut, _In, _Out, run_out, ts
from leoflow.domain.backfill import BackfillError, plan_backfill, range_bound, select_points
from leoflow.domain.timebounds import OutOfRange, check_moment
from leoflow.store.backfill_pages import (
    backfill_points_with_runs,
    progress_of,
    progress_of_points,
)
from leoflow.store.backfills import (
    BackfillConflict,
    BackfillProgress,
    BackfillRow,
    backfill_progress,
    cancel_backfill,
    create_backfill,
    get_backfill,
    list_backfills,
    runs_in_range,
)

router = APIRouter(prefix="/api/v1", tags=["backfills"])


_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
    422: {"model": UnprocessableOut},
}


class BackfillIn(_In):
    start: Annotated[datetime, BeforeValidator(partial(range_bound, end=False))] = Field(
        alias="from", description="first instant of the range, or a day: its start (naive: UTC)"
    )
    end: Annotated[datetime, BeforeValidator(partial(range_bound, end=True))] = Field(
        alias="to", description="last instant of the range, or a day: all of it (included)"
    )
    reprocess_failed: bool = False
    max_active_runs: int | None = Field(None, ge=1, le=1000)
    dry_run: bool = False

    @field_validator("start", "end")
    @classmethod
    def _within_span(cls, value: datetime) -> datetime:
        # A date a schedule cannot reason about is the request's fault, said per field.
        try:
            return check_moment(value)
        except OutOfRange as exc:
            raise ValueError(str(exc)) from None


class ProgressOut(_Out):
    total: int
    pending: int
    queued: int
    running: int
    success: int
    failed: int


class BackfillOut(_Out):
    pk: int
    dag_id: str
    state: str
    range_start: datetime | None
    range_end: datetime | None
    reprocess_failed: bool
    max_active_runs: int
    created_by: str
    created_at: datetime | None
    ended_at: datetime | None
    message: str | None
    progress: ProgressOut


class BackfillPlanOut(_Out):
    dag_id: str
    dry_run: bool = True
    logical_dates: list[datetime]
    skipped: list[datetime] = Field(description="cron points that already have a run")
    max_active_runs: int


class BackfillRunsOut(_Out):
    backfill: BackfillOut
    runs: list[RunOut]
    pending: list[datetime]


async def _out(ctx: Ctx, row: BackfillRow, progress: BackfillProgress | None = None) -> BackfillOut:
    if progress is None:
        progress = await backfill_progress(ctx.store, row.pk)
    return BackfillOut(
        pk=row.pk,
        dag_id=row.dag_id,
        state=row.state,
        range_start=ts(row.range_start),
        range_end=ts(row.range_end),
        reprocess_failed=row.reprocess_failed,
        max_active_runs=row.max_active_runs,
        created_by=row.created_by,
        created_at=ts(row.created_at),
        ended_at=ts(row.ended_at),
        message=row.message,
        progress=ProgressOut(
            total=progress.total,
            pending=progress.pending,
            queued=progress.queued,
            running=progress.running,
            success=progress.success,
            failed=progress.failed,
        ),
    )


async def _backfill_or_404(ctx: Ctx, pk: int) -> BackfillRow:
    row = await get_backfill(ctx.store, pk)
    if row is None:
        raise HTTPException(404, f"no backfill {pk}")
    return row


@router.post(
    "/dags/{dag_id}/backfills",
    status_code=201,
    response_model=BackfillOut,
    responses={**_ERRORS, 200: {"model": BackfillPlanOut}},
    summary="Backfill a past range (or plan it: dry_run)",
    description="One run per cron point in [from, to], each with its logical date. A "
    "point that already has a run is skipped (with reprocess_failed: rerun if it "
    "failed). A range with no cron point, or reaching into the future, is refused "
    "with 422 and nothing is created.",
)
async def create(dag_id: str, body: BackfillIn, ctx: Ctx, who: Operator) -> JSONResponse:
    dag = await dag_or_404(ctx.store, dag_id)
    if not dag.active:
        raise HTTPException(409, f"DAG {dag_id!r} is inactive: its file is gone ({dag.fileloc})")
    spec = spec_of(dag)
    if spec is None:
        raise HTTPException(409, f"DAG {dag_id!r} has a stored spec this version cannot read")
    try:
        points = plan_backfill(spec, body.start, body.end, datetime.fromtimestamp(ctx.clock(), UTC))
    except BackfillError as exc:
        raise HTTPException(422, str(exc)) from exc
    existing = await runs_in_range(
        ctx.store, dag_id, points[0].logical_date, points[-1].logical_date
    )
    chosen, skipped = select_points(points, existing, body.reprocess_failed)
    max_active = body.max_active_runs or spec.max_active_runs
    if body.dry_run:
        plan = BackfillPlanOut(
            dag_id=dag_id,
            logical_dates=[datetime.fromtimestamp(p.logical_date, UTC) for p in chosen],
            skipped=[datetime.fromtimestamp(p.logical_date, UTC) for p in skipped],
            max_active_runs=max_active,
        )
        return JSONResponse(plan.model_dump(mode="json"), status_code=200)
    if not chosen:
        hint = "" if body.reprocess_failed else " (reprocess_failed reruns the failed ones)"
        raise HTTPException(
            409, f"every one of the {len(points)} cron point(s) in the range has a run{hint}"
        )
    try:
        row = await create_backfill(
            ctx.store,
            dag_id=dag_id,
            range_start=points[0].logical_date,
            range_end=points[-1].logical_date,
            points=[p.logical_date for p in chosen],
            reprocess_failed=body.reprocess_failed,
            max_active_runs=max_active,
            created_by=who.name,
        )
    except BackfillConflict as exc:
        raise HTTPException(409, str(exc)) from exc
    ctx.changed()
    out = await _out(ctx, row)
    return JSONResponse(
        out.model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/api/v1/backfills/{row.pk}"},
    )


@router.get("/dags/{dag_id}/backfills", response_model=list[BackfillOut])
async def list_dag_backfills(dag_id: str, ctx: Ctx, who: Viewer) -> list[BackfillOut]:
    rows = await list_backfills(ctx.store, dag_id=dag_id)
    progress = await progress_of(ctx.store, [row.pk for row in rows])
    return [await _out(ctx, row, progress[row.pk]) for row in rows]


@router.get("/backfills/{pk}", response_model=BackfillRunsOut, responses=_ERRORS)
async def get(pk: int, ctx: Ctx, who: Viewer) -> BackfillRunsOut:
    row = await _backfill_or_404(ctx, pk)
    # The points and their runs in one join; the progress is counted from the same rows.
    points = await backfill_points_with_runs(ctx.store, pk)
    runs = [run_out(p.run) for p in points if p.run is not None]
    pending = [datetime.fromtimestamp(p.logical_date, UTC) for p in points if not p.made]
    out = await _out(ctx, row, progress_of_points(points))
    return BackfillRunsOut(backfill=out, runs=runs, pending=pending)


@router.post(
    "/backfills/{pk}/cancel",
    response_model=BackfillOut,
    responses=_ERRORS,
    summary="Cancel a backfill as a whole",
    description="No further run is made; its queued and running runs turn failed at "
    "once and the scheduler stops their tasks. Finished runs stay as they are.",
)
async def cancel(pk: int, ctx: Ctx, who: Operator) -> BackfillOut:
    row = await _backfill_or_404(ctx, pk)
    if await cancel_backfill(ctx.store, pk, who.name) is None:
        raise HTTPException(409, f"backfill {pk} is already {row.state}")
    ctx.changed()
    return await _out(ctx, await _backfill_or_404(ctx, pk))
