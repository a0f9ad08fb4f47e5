"""Marking task instances success or failed, and clearing a run's failed tasks.

As a clear (``tasks.py``): a finished run's change is written at once (200) and the
run goes back to running for the scheduler to end it again by its tasks' states; a
running run's is recorded (202, pending) and the leading scheduler applies it on its
next poll, stopping a live try of a marked task. Which tasks a mark takes and which
tasks below it are decided again: ``leoflow/domain/marking.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from leoflow.api.auth import Operator
from leoflow.api.context import Ctx
from leoflow.api.lookup import run_or_404, task_or_404
from leoflow.api.run_changes import refuse_if_queued, run_graph
from leoflow.api.schemas import ClearResult, ErrorOut, MarkResult, run_out
from leoflow.domain.marking import MARKS, plan
from leoflow.domain.states import RUN_TERMINAL
from leoflow.store.clears import ClearLost, clear_finished_run, request_clear
from leoflow.store.marks import mark_finished_run

router = APIRouter(prefix="/api/v1/dags/{dag_id}/runs/{run_id}", tags=["task instances"])

_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


@router.post(
    "/tasks/{task_id}/mark",
    response_model=MarkResult,
    responses={**_ERRORS, 202: {"model": MarkResult, "description": "mark requested"}},
    summary="Mark a task instance success or failed (with its downstream or upstream)",
    description="As Airflow's mark success/failed: the task (with downstream=true the "
    "tasks below it, with upstream=true the tasks above it) takes the state, a live try "
    "of one stopped. Tasks below a marked one that a trigger rule decided without "
    "running them (upstream_failed, skipped) go back to none, so the scheduler decides "
    "them again: after marking a failed task success its downstream runs. A finished "
    "run's mark is written at once (200) and the run goes back to running until the "
    "scheduler ends it by its tasks' states; a running run's is recorded (202) and "
    "applied on the scheduler's next poll. 409 for a queued run or a task already in "
    "the state.",
)
async def mark_task_instance(
    dag_id: str,
    run_id: str,
    task_id: str,
    ctx: Ctx,
    who: Operator,
    response: Response,
    state: Annotated[Literal["success", "failed"], Query(description="the state to set")],
    downstream: Annotated[bool, Query(description="also mark every task below it")] = False,
    upstream: Annotated[bool, Query(description="also mark every task above it")] = False,
) -> MarkResult:
    store = ctx.store
    run, target, tis = await task_or_404(store, dag_id, run_id, task_id)
    refuse_if_queued(run, "marked")
    spec = await run_graph(store, dag_id, tis)
    known = spec is not None and task_id in spec.tasks
    below = spec.downstream() if spec is not None and known else {}
    above = {t: s.depends_on for t, s in spec.tasks.items()} if spec is not None else {}
    states = {ti.task_id: (ti.state, ti.try_number) for ti in tis}
    names, reopen = plan(
        state, task_id, below, above, states, with_downstream=downstream, with_upstream=upstream
    )
    if run.state not in RUN_TERMINAL:
        if target.state is MARKS[state] and len(names) == 1:
            raise HTTPException(409, f"task {task_id!r} is {state} already; nothing was marked")
        request = await request_clear(
            store,
            run.pk,
            task_id,
            downstream=downstream,
            upstream=upstream,
            action=state,
            by=who.name,
            at=ctx.clock(),
        )
        ctx.changed()
        response.status_code = 202
        return MarkResult(
            marked=[n for n in names if n in states and states[n][0] is not MARKS[state]],
            reopened=reopen,
            state=state,
            run=run_out(run),
            pending=True,
            request_id=request.pk,
        )
    try:
        changed = await mark_finished_run(
            store,
            run,
            tis,
            names,
            reopen,
            state=MARKS[state],
            target=task_id,
            by=who.name,
            at=ctx.clock(),
            epoch=None,
        )
    except ClearLost as exc:
        raise HTTPException(409, str(exc)) from exc
    ctx.changed()
    return MarkResult(
        marked=sorted(n for n in changed if n not in reopen),
        reopened=[n for n in changed if n in reopen],
        state=state,
        run=run_out(await run_or_404(store, dag_id, run_id)),
    )


@router.post(
    "/clear_failed",
    response_model=ClearResult,
    responses={**_ERRORS, 202: {"model": ClearResult, "description": "clear requested"}},
    summary="Clear every failed task of a run (and the upstream_failed ones)",
    description="As Airflow's clear of failed tasks: each failed or upstream_failed task "
    "goes back to none with its retries renewed. A finished run's clear is written at "
    "once (200) and the run goes back to running; a running run's is recorded (202) and "
    "the scheduler clears the tasks failed when it applies it. 409 for a queued run or "
    "a run with no failed task.",
)
async def clear_failed_tasks(
    dag_id: str, run_id: str, ctx: Ctx, who: Operator, response: Response
) -> ClearResult:
    store = ctx.store
    run = await run_or_404(store, dag_id, run_id)
    refuse_if_queued(run, "cleared")
    tis = await store.list_task_instances(run_pk=run.pk)
    states = {ti.task_id: (ti.state, ti.try_number) for ti in tis}
    names, _ = plan("clear_failed", "", {}, {}, states, with_downstream=False, with_upstream=False)
    if not names:
        raise HTTPException(
            409, f"run {run_id!r} ({run.state.value}) has no failed task; nothing was cleared"
        )
    if run.state not in RUN_TERMINAL:
        request = await request_clear(
            store, run.pk, "", downstream=False, action="clear_failed", by=who.name, at=ctx.clock()
        )
        ctx.changed()
        response.status_code = 202
        return ClearResult(cleared=names, run=run_out(run), pending=True, request_id=request.pk)
    spec = await run_graph(store, dag_id, tis)
    try:
        cleared = await clear_finished_run(
            store, run, tis, spec, names, target=names[0], by=who.name, epoch=None
        )
    except ClearLost as exc:
        raise HTTPException(409, str(exc)) from exc
    ctx.changed()
    return ClearResult(cleared=cleared, run=run_out(await run_or_404(store, dag_id, run_id)))
