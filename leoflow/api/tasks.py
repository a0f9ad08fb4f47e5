"""Task instances: list, get, clear (re-run), and why one is waiting."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from leoflow.api.auth import Operator, Viewer
from leoflow.api.context import Ctx
from leoflow.api.lookup import run_or_404, spec_of, task_or_404
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
from leoflow.domain.explain import RunInfo, explain
from leoflow.domain.mapping import with_items
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.domain.trigger_rules import TriggerRule
from leoflow.store.rows import TaskChange, TaskInstanceRow

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


def _downstream_closure(start: str, downstream: dict[str, list[str]]) -> list[str]:
    seen = {start}
    stack = [start]
    while stack:
        for child in downstream.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return sorted(seen)


@router.post(
    "/{task_id}/clear",
    response_model=ClearResult,
    responses=_ERRORS,
    summary="Clear a finished task instance so it runs again",
    description="Only for a finished run (409 otherwise). The task (and with downstream=true "
    "everything below it) goes back to none with its retries renewed, and the run to running; "
    "the scheduler picks the run up on its next poll.",
)
async def clear_task_instance(
    dag_id: str,
    run_id: str,
    task_id: str,
    ctx: Ctx,
    who: Operator,
    downstream: Annotated[bool, Query(description="also clear every task below it")] = False,
) -> ClearResult:
    store = ctx.store
    run, target, tis = await task_or_404(store, dag_id, run_id, task_id)
    if run.state not in RUN_TERMINAL:
        raise HTTPException(
            409, f"run {run_id!r} is {run.state.value}: only a finished run's tasks can be cleared"
        )
    if target.state not in TASK_TERMINAL:
        raise HTTPException(
            409, f"task {task_id!r} is {target.state.value}: only a finished task can be cleared"
        )
    dag = await store.get_dag(dag_id)
    spec = spec_of(dag) if dag is not None else None
    names = [task_id]
    if downstream and spec is not None and task_id in spec.tasks:
        names = _downstream_closure(task_id, spec.downstream())
    by_id = {ti.task_id: ti for ti in tis}
    chosen: list[TaskInstanceRow] = [
        by_id[n] for n in names if n in by_id and by_id[n].state in TASK_TERMINAL
    ]
    changes = []
    for ti in chosen:
        task_spec = spec.tasks.get(ti.task_id) if spec is not None else None
        tries = task_spec.max_tries if task_spec is not None else 1
        changes.append(
            TaskChange(
                ti.pk,
                ti.state,
                TaskState.NONE,
                expected_try=ti.try_number,
                fields={
                    # The next try is try_number + 1 and gets the task's retries anew.
                    "max_tries": ti.try_number + tries,
                    "ready_at": None,
                    "queued_at": None,
                    "started_at": None,
                    "ended_at": None,
                    "next_retry_at": None,
                    "heartbeat_at": None,
                    "exit_code": None,
                    "reason": None,
                    "message": f"cleared by {who.name}",
                    "executor_ref": None,
                },
            )
        )
    # Task instances first, then the run: a scheduler never sees a running run whose
    # tasks are all still finished (it would finish the run again at once).
    results = await store.transition_tasks(changes, epoch=None)
    if not results or not results[0]:
        raise HTTPException(409, f"task {task_id!r} changed meanwhile; nothing was cleared")
    cleared = [ti.task_id for ti, ok in zip(chosen, results, strict=True) if ok]
    if not await store.transition_run(
        run.pk,
        run.state,
        RunState.RUNNING,
        epoch=None,
        ended_at=None,
        message=f"tasks cleared by {who.name}: {', '.join(cleared)}",
    ):
        current = await run_or_404(store, dag_id, run_id)
        if current.state is not RunState.RUNNING:
            raise HTTPException(409, f"run {run_id!r} changed meanwhile ({current.state.value})")
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
    dag = await store.get_dag(dag_id)
    # The run's DAG: a mapped task's items in place of it (leoflow/domain/mapping.py).
    spec = spec_of(dag) if dag is not None else None
    spec = with_items(spec, tis) if spec is not None else None
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
