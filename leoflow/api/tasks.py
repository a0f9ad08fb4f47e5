"""Task instances: list, get, clear (re-run; of a running run, a request the scheduler
applies), and why one is waiting."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response

from leoflow.api.auth import Operator, Viewer
from leoflow.api.context import Ctx
from leoflow.api.lookup import run_or_404, task_or_404
from leoflow.api.run_changes import refuse_if_queued, run_graph
from leoflow.api.schemas import (
    Blocker,
    ClearResult,
    ErrorOut,
    TaskInstanceOut,
    TaskInstancePage,
    Upstream,
    WhyOut,
    run_out,
    ti_out,
    ts,
)
from leoflow.api.snapshot import admission_snapshot, run_gate
from leoflow.domain.clearing import clear_closure
from leoflow.domain.explain import RunInfo, explain
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.domain.trigger_rules import TriggerRule
from leoflow.store.clears import ClearLost, clear_finished_run, request_clear

router = APIRouter(prefix="/api/v1/dags/{dag_id}/runs/{run_id}/tasks", tags=["task instances"])

_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


@router.get("", response_model=TaskInstancePage, responses=_ERRORS)
async def list_task_instances(
    dag_id: str,
    run_id: str,
    ctx: Ctx,
    who: Viewer,
    after: Annotated[
        int | None, Query(ge=0, le=2**62, description="the next_cursor of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> TaskInstancePage:
    run = await run_or_404(ctx.store, dag_id, run_id)
    rows = await ctx.store.list_task_instances(run_pk=run.pk, limit=limit + 1, after_pk=after)
    more = len(rows) > limit
    rows = rows[:limit]
    return TaskInstancePage(
        task_instances=[ti_out(r) for r in rows],
        next_cursor=rows[-1].pk if more and rows else None,
    )


@router.get("/{task_id}", response_model=TaskInstanceOut, responses=_ERRORS)
async def get_task_instance(
    dag_id: str, run_id: str, task_id: str, ctx: Ctx, who: Viewer
) -> TaskInstanceOut:
    _, ti, _ = await task_or_404(ctx.store, dag_id, run_id, task_id)
    return ti_out(ti)


@router.post(
    "/{task_id}/clear",
    response_model=ClearResult,
    responses={**_ERRORS, 202: {"model": ClearResult, "description": "clear requested"}},
    summary="Clear a task instance so it runs again (finished or running run)",
    description="The task (and with downstream=true everything below it) goes back to none "
    "with its retries renewed. A finished run's clear is written at once (200) and the run "
    "goes back to running. A running run's clear is recorded (202, pending=true) and the "
    "leading scheduler applies it on its next poll: a queued or running try of a cleared "
    "task is stopped (ending as `cleared`) and the task runs again in the same run; "
    "finished tasks that are not cleared stay as they are. 409 for a queued run.",
)
async def clear_task_instance(
    dag_id: str,
    run_id: str,
    task_id: str,
    ctx: Ctx,
    who: Operator,
    response: Response,
    downstream: Annotated[bool, Query(description="also clear every task below it")] = False,
) -> ClearResult:
    store = ctx.store
    run, target, tis = await task_or_404(store, dag_id, run_id, task_id)
    refuse_if_queued(run, "cleared")
    spec = await run_graph(store, dag_id, tis)
    below = spec.downstream() if spec is not None and task_id in spec.tasks else {}
    names = clear_closure(task_id, below, with_downstream=downstream)
    if run.state not in RUN_TERMINAL:
        present = {ti.task_id for ti in tis}
        request = await request_clear(
            store, run.pk, task_id, downstream=downstream, by=who.name, at=ctx.clock()
        )
        ctx.changed()
        response.status_code = 202
        return ClearResult(
            cleared=[n for n in names if n in present],
            run=run_out(run),
            pending=True,
            request_id=request.pk,
        )
    if target.state not in TASK_TERMINAL:
        raise HTTPException(
            409, f"task {task_id!r} is {target.state.value}: only a finished task can be cleared"
        )
    try:
        cleared = await clear_finished_run(
            store, run, tis, spec, names, target=task_id, by=who.name, epoch=None
        )
    except ClearLost as exc:
        raise HTTPException(409, str(exc)) from exc
    ctx.changed()
    return ClearResult(cleared=cleared, run=run_out(await run_or_404(store, dag_id, run_id)))


@router.get(
    "/{task_id}/why",
    response_model=WhyOut,
    responses=_ERRORS,
    summary="Why is it waiting? The blocking limit, with its numbers",
)
async def why_waiting(dag_id: str, run_id: str, task_id: str, ctx: Ctx, who: Viewer) -> WhyOut:
    store = ctx.store
    run, ti, tis = await task_or_404(store, dag_id, run_id, task_id)
    spec = await run_graph(store, dag_id, tis)
    task_spec = spec.tasks.get(task_id) if spec is not None else None
    run_info = RunInfo(run.pk, run.dag_id, run.run_id, run.state, run.created_at)
    gate = snapshot = None
    if run.state is RunState.QUEUED and ti.state not in TASK_TERMINAL:
        gate = await run_gate(store, run_info, spec.max_active_runs if spec else 1)
    elif run.state is RunState.RUNNING and ti.state is TaskState.SCHEDULED:
        snapshot = await admission_snapshot(store, ctx.settings, target=ti)
    answer = explain(
        ti,
        run_info,
        now=ctx.clock(),
        depends_on=task_spec.depends_on if task_spec is not None else (),
        trigger_rule=task_spec.trigger_rule if task_spec is not None else TriggerRule.ALL_SUCCESS,
        run_task_states={t.task_id: t.state for t in tis},
        gate=gate,
        snapshot=snapshot,
    )
    return WhyOut(
        task_id=task_id,
        state=answer.state,
        waiting=answer.waiting,
        reason=answer.reason,
        message=answer.message,
        used=answer.used,
        limit=answer.limit,
        needed=answer.needed,
        also=[
            Blocker(reason=b.reason, message=b.message, used=b.used, limit=b.limit, needed=b.needed)
            for b in answer.also
        ],
        upstreams=[Upstream(task_id=u, state=s) for u, s in answer.upstreams],
        retry_at=ts(answer.retry_at),
    )
