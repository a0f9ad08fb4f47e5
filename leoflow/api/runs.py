"""Runs: trigger, list (filters, keyset pagination), get, cancel."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import JSONResponse

from leoflow.api.auth import Operator, Viewer
from leoflow.api.context import Ctx
from leoflow.api.lookup import dag_or_404, run_or_404, spec_of
from leoflow.api.schemas import ErrorOut, RunOut, RunPage, TriggerIn, run_out
from leoflow.domain.dbt_run_select import RunSelectionError, run_tasks
from leoflow.domain.params import ParamError, resolve_conf
from leoflow.domain.states import RUN_TERMINAL, RunState
from leoflow.store.errors import RunExists
from leoflow.store.rows import TaskSeed
from leoflow.store.run_search import RunFilter, find_runs

router = APIRouter(prefix="/api/v1", tags=["runs"])

MAX_PAGE = 1000
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
}

Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="page size")]
Before = Annotated[
    int | None, Query(ge=1, le=2**62, description="the next_cursor of the previous page")
]
States = Annotated[list[RunState] | None, Query(description="only runs in these states")]


RunType = Literal["manual", "scheduled", "local", "backfill"]


@dataclass(frozen=True)
class _Filters:
    state: list[RunState] | None
    run_type: list[RunType] | None
    cancelled: bool | None
    date_from: datetime | None
    date_to: datetime | None


def _filters(
    state: States = None,
    run_type: Annotated[list[RunType] | None, Query(description="only runs of these types")] = None,
    cancelled: Annotated[
        bool | None,
        Query(description="true: only cancelled runs (failed by a cancel); false: none"),
    ] = None,
    date_from: Annotated[
        datetime | None,
        Query(description="runs dated at or after (logical date; a manual run's: made)"),
    ] = None,
    date_to: Annotated[datetime | None, Query(description="runs dated before")] = None,
) -> _Filters:
    return _Filters(state, run_type, cancelled, date_from, date_to)


Filters = Annotated[_Filters, Depends(_filters)]


def _stamp(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


async def _page(
    ctx: Ctx, dag_id: str | None, f: _Filters, before: int | None, limit: int
) -> RunPage:
    which = RunFilter(
        dag_id=dag_id,
        states=f.state or (),
        cancelled=f.cancelled,
        run_types=f.run_type or (),
        date_from=_stamp(f.date_from),
        date_to=_stamp(f.date_to),
    )
    # One row more than asked says whether another page exists.
    rows = await find_runs(ctx.store, which, limit=limit + 1, before=before)
    more = len(rows) > limit
    rows = rows[:limit]
    return RunPage(
        runs=[run_out(r) for r in rows], next_cursor=rows[-1].pk if more and rows else None
    )


@router.get("/runs", response_model=RunPage, summary="List runs, newest first")
async def list_runs(
    ctx: Ctx,
    who: Viewer,
    filters: Filters,
    dag_id: Annotated[str | None, Query(max_length=200)] = None,
    before: Before = None,
    limit: Limit = 100,
) -> RunPage:
    return await _page(ctx, dag_id, filters, before, limit)


@router.get("/dags/{dag_id}/runs", response_model=RunPage, summary="List a DAG's runs")
async def list_dag_runs(
    dag_id: str,
    ctx: Ctx,
    who: Viewer,
    filters: Filters,
    before: Before = None,
    limit: Limit = 100,
) -> RunPage:
    return await _page(ctx, dag_id, filters, before, limit)


@router.post(
    "/dags/{dag_id}/runs",
    status_code=201,
    response_model=RunOut,
    responses={**_ERRORS, 400: {"model": ErrorOut}},
    summary="Trigger a run",
    description="The run is created queued; the scheduler starts it as max_active_runs "
    "allows. A paused or inactive DAG is refused with 409 (unpause it first). "
    "conf.dbt_select / conf.dbt_exclude (dbt selectors) make a run of the matching dbt "
    "tasks and every other task; a selector Leoflow cannot evaluate, or one matching no "
    "dbt task, is refused with 400 and no run is made. The DAG's params type the conf: a "
    "missing param takes its default, and a missing required one or a value of the wrong "
    "type is refused with 422 naming the field (conf.<name>).",
)
async def trigger_run(
    dag_id: str, ctx: Ctx, who: Operator, body: TriggerIn | None = None
) -> JSONResponse:
    body = body or TriggerIn()
    # The guard refused NaN/Infinity and deep nesting; the size is bounded on its own
    # because conf is stored with the run and handed to every task.
    conf_size = len(json.dumps(body.conf, separators=(",", ":")).encode())
    if conf_size > ctx.settings.api_run_conf_limit:
        raise HTTPException(
            422,
            f"conf is {conf_size} bytes as JSON; the limit is "
            f"{ctx.settings.api_run_conf_limit} (api_run_conf_limit, "
            "LEOFLOW_API_RUN_CONF_LIMIT)",
        )
    dag = await dag_or_404(ctx.store, dag_id)
    if dag.paused:
        raise HTTPException(409, f"DAG {dag_id!r} is paused: unpause it to trigger a run")
    if not dag.active:
        raise HTTPException(409, f"DAG {dag_id!r} is inactive: its file is gone ({dag.fileloc})")
    spec = spec_of(dag)
    if spec is None:
        raise HTTPException(409, f"DAG {dag_id!r} has a stored spec this version cannot read")
    try:
        conf = resolve_conf(spec.params, body.conf)
    except ParamError as exc:
        raise HTTPException(422, str(exc)) from None
    try:
        keep = run_tasks(spec, conf)  # a dbt selection in conf: part of the DAG
    except RunSelectionError as exc:
        raise HTTPException(400, str(exc)) from exc
    seeds = [
        TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
        for t in spec.tasks.values()
        if keep is None or t.task_id in keep
    ]
    try:
        row = await ctx.store.create_run(
            dag_id,
            body.run_id or None,  # None: the store makes one up
            run_type="manual",
            logical_date=None,
            conf=conf,
            tasks=seeds,
            epoch=None,
        )
    except RunExists as exc:
        raise HTTPException(409, str(exc)) from exc
    ctx.changed()
    out = run_out(row)
    return JSONResponse(
        out.model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/api/v1/dags/{dag_id}/runs/{row.run_id}"},
    )


@router.get("/dags/{dag_id}/runs/{run_id}", response_model=RunOut, responses=_ERRORS)
async def get_run(dag_id: str, run_id: str, ctx: Ctx, who: Viewer) -> RunOut:
    return run_out(await run_or_404(ctx.store, dag_id, run_id))


@router.post(
    "/dags/{dag_id}/runs/{run_id}/cancel",
    response_model=RunOut,
    responses=_ERRORS,
    summary="Cancel a queued or running run",
    description="The run turns failed at once; the scheduler then stops its task instances.",
)
async def cancel_run(dag_id: str, run_id: str, ctx: Ctx, who: Operator) -> RunOut:
    store = ctx.store
    run = await run_or_404(store, dag_id, run_id)
    # The run may go queued -> running between the read and the write: read again.
    for _ in range(3):
        if run.state in RUN_TERMINAL:
            raise HTTPException(409, f"run {run_id!r} is already {run.state.value}")
        if await store.transition_run(
            run.pk,
            run.state,
            RunState.FAILED,
            epoch=None,
            ended_at=time.time(),
            message=f"cancelled by {who.name}",
        ):
            ctx.changed()
            break
        run = await run_or_404(store, dag_id, run_id)
    else:  # pragma: no cover - three lost races in a row
        raise HTTPException(409, f"run {run_id!r} keeps changing; try again")
    return run_out(await run_or_404(store, dag_id, run_id))
