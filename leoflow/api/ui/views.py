"""What the DAGs, DAG, run and task pages show, read through the API's own
functions and its store context (the waiting and pools pages: ``waiting``).

Each ``*_view`` returns the template context of one page; the live updates render
the same context's regions again, so a page and its updates cannot disagree. Each
reads a bounded number of rows in a few statements (``leoflow.store.overview``):
no page reads all runs, nor asks once per DAG or per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import HTTPException
from markupsafe import Markup

from leoflow.api import tasks as tasks_api
from leoflow.api.auth import Principal
from leoflow.api.context import ApiContext
from leoflow.api.lookup import dag_or_404, run_or_404, spec_of, task_or_404
from leoflow.api.tries import tries_of, where_ran
from leoflow.api.ui.fragments import (
    GridColumn,
    drawing_of,
    graph_nodes,
    grid_cells,
    grid_rows,
    items_url,
    run_squares,
)
from leoflow.api.ui.grid_window import GRAPH_INLINE, GridWindow, grid_shape
from leoflow.api.ui.moved import Redirect
from leoflow.api.ui.present import dag_url, exit_words, pod_of, quoted
from leoflow.api.ui.task_facts import task_facts
from leoflow.domain.dag import DagSpec
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.store.rows import DagRow, RunRow
from leoflow.store.run_search import cancelled_tasks

DAGS_PAGE = 25
LAST_RUNS = 8
GRID_RUNS = 12
GRID_CELLS = 1200

_ACTIVE = (RunState.QUEUED, RunState.RUNNING)


# ------------------------------------------------------------------------------ DAGs


@dataclass
class DagLine:
    row: DagRow
    spec: DagSpec | None
    runs: list[RunRow]
    running: int
    queued: int
    next_run: float | None

    @property
    def url(self) -> str:
        return dag_url(self.row.dag_id)

    @property
    def squares(self) -> Markup:
        return run_squares(self.row.dag_id, self.runs)

    @property
    def late(self) -> int:
        """How many of the runs shown missed their deadline."""
        return sum(1 for r in self.runs if r.deadline_missed_at is not None)


DAG_FILTERS = ("all", "active", "paused", "failing", "running")


def _next_run(spec: DagSpec | None, paused: bool, now: float) -> float | None:
    if spec is None or paused:
        return None
    cron = spec.cron()
    if cron is None:
        return None
    start = now
    if spec.start_date is not None:
        first = spec.start_date if spec.start_date.tzinfo else spec.start_date.replace(tzinfo=UTC)
        start = max(start, first.timestamp() - 1)
    fire = cron.next_after(datetime.fromtimestamp(start, UTC))
    return None if fire is None else fire.timestamp()


async def dags_view(ctx: ApiContext, q: str, state: str, page: int) -> dict[str, Any]:
    store = ctx.store
    now = ctx.clock()
    # Filter and page on the DAGs' heads; read the specs of the page's DAGs only.
    heads = [h for h in await store.dag_heads() if h.active or h.last_error]
    errors = await store.list_dag_errors()
    counts = await store.count_runs_by_dag(_ACTIVE)
    needle = q.strip().lower()
    if needle:
        heads = [h for h in heads if needle in h.dag_id.lower()]
    if state == "active":
        heads = [h for h in heads if not h.paused]
    elif state == "paused":
        heads = [h for h in heads if h.paused]
    elif state == "running":
        heads = [h for h in heads if counts[(h.dag_id, RunState.RUNNING.value)]]
    elif state == "failing":
        # Each DAG's last run, in one statement (a LATERAL per DAG on PostgreSQL).
        last = await store.runs_per_dag([h.dag_id for h in heads], 1)
        heads = [h for h in heads if last[h.dag_id] and last[h.dag_id][0].state is RunState.FAILED]
    heads.sort(key=lambda h: h.dag_id)  # as Python orders, whatever the collation
    total = len(heads)
    pages = max(1, -(-total // DAGS_PAGE))
    page = min(max(1, page), pages)
    shown = [h.dag_id for h in heads[(page - 1) * DAGS_PAGE : page * DAGS_PAGE]]
    rows = await store.dags_by_id(shown)
    recent = await store.runs_per_dag(shown, LAST_RUNS)
    lines: list[DagLine] = []
    for dag_id in shown:
        row = rows.get(dag_id)
        if row is None:  # deleted between the two reads
            continue
        spec = spec_of(row)
        lines.append(
            DagLine(
                row,
                spec,
                list(reversed(recent.get(dag_id, []))),
                counts[(dag_id, RunState.RUNNING.value)],
                counts[(dag_id, RunState.QUEUED.value)],
                _next_run(spec, row.paused, now),
            )
        )
    return {
        "lines": lines,
        "errors": errors,
        "q": q,
        "state": state,
        "filters": DAG_FILTERS,
        "page": page,
        "pages": pages,
        "total": total,
    }


# ------------------------------------------------------------------------------- a DAG


async def dag_view(
    ctx: ApiContext,
    dag_id: str,
    run_id: str | None,
    before: int | None,
    runs: int | None,
    rows: GridWindow | None = None,
) -> dict[str, Any]:
    store = ctx.store
    row = await dag_or_404(store, dag_id)
    spec = spec_of(row)
    if spec is None:
        raise HTTPException(409, f"DAG {dag_id!r} has a stored spec this version cannot read")
    # A wide DAG shows fewer runs by default, so the grid stays near GRID_CELLS squares.
    runs_shown = runs or max(3, min(GRID_RUNS, GRID_CELLS // max(1, len(spec.tasks))))
    drawing = drawing_of(row, spec)
    fetched = await store.list_runs(dag_id=dag_id, limit=runs_shown + 1, before_pk=before)
    older = fetched[runs_shown].pk + 1 if len(fetched) > runs_shown else None
    shown = fetched[:runs_shown]
    selected: RunRow | None = None
    if run_id:
        selected = await run_or_404(store, dag_id, run_id)
    elif shown:
        selected = shown[0] if before is None else None
    if selected is None and run_id is None:
        latest = await store.list_runs(dag_id=dag_id, limit=1)
        selected = latest[0] if latest else None
    wanted = [r.pk for r in shown] + ([selected.pk] if selected is not None else [])
    by_run = await store.task_states_of_runs(wanted)
    cancelled = await cancelled_tasks(store, wanted)
    columns = [
        GridColumn(r, by_run.get(r.pk, {}), cancelled.get(r.pk, frozenset()))
        for r in reversed(shown)
    ]
    selected_states = by_run.get(selected.pk, {}) if selected is not None else {}
    selected_cancelled = cancelled.get(selected.pk, frozenset()) if selected else frozenset()
    order = drawing.order
    mapped = mapped_tasks(spec)
    window = (rows or GridWindow()).over(order)
    cells = grid_cells(dag_id, window.tasks, columns, mapped)
    lazy = len(order) > GRAPH_INLINE
    kept = [(k, v) for k, v in (("run", run_id), ("before", before), ("runs", runs)) if v]
    return {
        "dag": row,
        "spec": spec,
        "layout": drawing.layout,
        "edges": drawing.edges,
        "selected_cancelled": selected_cancelled,
        # A big DAG's graph comes after the page (``/ui/graph``): the page paints first.
        "lazy_graph": lazy,
        "nodes": Markup("")
        if lazy
        else graph_nodes(
            drawing.layout, dag_id, selected, selected_states, mapped, selected_cancelled
        ),
        "grid_rows": grid_rows(window.tasks, columns, cells),
        "grid_cells": cells,
        "grid_shape": grid_shape(columns, window, older, before),
        "window": window,
        # The page's other choices, kept by the grid's row links and search.
        "grid_params": kept,
        "grid_query": "".join(f"{k}={quoted(str(v))}&" for k, v in kept),
        "mapped": mapped,
        "order": order,
        "columns": columns,
        "selected": selected,
        "follow_latest": run_id is None,
        "selected_states": selected_states,
        "older": older,
        "newer": before is not None,
        "runs_shown": runs_shown,
        "next_run": _next_run(spec, row.paused, ctx.clock()),
    }


def mapped_tasks(spec: DagSpec) -> frozenset[str]:
    """The DAG's mapped tasks: in a run, items ``task[i]`` stand in their place."""
    return frozenset(t for t, task in spec.tasks.items() if task.map_over is not None)


# ----------------------------------------------------------------------- a task instance


async def task_view(
    ctx: ApiContext,
    who: Principal,
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int | None,
) -> dict[str, Any]:
    store = ctx.store
    try:
        run, ti, _ = await task_or_404(store, dag_id, run_id, task_id)
    except HTTPException as exc:
        # A mapped task has no instance of its own once its items are made: its page
        # is the list of its items.
        dag = await store.get_dag(dag_id) if exc.status_code == 404 else None
        spec = spec_of(dag) if dag is not None else None
        if spec is not None and task_id in mapped_tasks(spec):
            raise Redirect(items_url(dag_id, run_id, task_id)) from None
        raise
    why = None
    if ti.state not in TASK_TERMINAL:
        why = await tasks_api.why_waiting(dag_id, run_id, task_id, ctx, who)
    chosen = ti.try_number if try_number is None else max(1, min(try_number, ti.try_number))
    live = chosen == ti.try_number and ti.state in (TaskState.QUEUED, TaskState.RUNNING)
    known = {t.try_number: t for t in await tries_of(store, ti)}
    # The chosen try's own facts; None: an earlier try whose facts were not kept (a row
    # retried before migration 0008).
    shown = known.get(chosen)
    dag = await store.get_dag(dag_id)
    return {
        **task_facts(spec_of(dag) if dag is not None else None, ti),
        "run": run,
        "ti": ti,
        "why": why,
        "tries": list(range(1, ti.try_number + 1)),
        "chosen_try": chosen,
        "shown": shown,
        "latest": chosen == ti.try_number,
        "pinned": try_number is not None,
        "log_live": live,
        "exit_words": exit_words(shown) if shown is not None else "",
        "pod": pod_of(shown) if shown is not None else None,
        "where": where_ran(shown.executor_ref) if shown is not None else {},
        "outcome_state": shown.state if shown is not None else ti.state.value,
        "pro": ctx.settings.executor == "kubernetes",
        "run_over": run.state in RUN_TERMINAL,
        # A running run's tasks can be cleared in any state: the scheduler stops a
        # live try and runs the task again (the API answers 202, pending).
        "run_live": run.state is RunState.RUNNING,
        "terminal": TASK_TERMINAL,
    }


async def graph_view(ctx: ApiContext, dag_id: str, run_id: str | None) -> dict[str, Any]:
    """A big DAG's graph alone (fetched after its page paints): the run's states."""
    store = ctx.store
    row = await dag_or_404(store, dag_id)
    spec = spec_of(row)
    if spec is None:
        raise HTTPException(409, f"DAG {dag_id!r} has a stored spec this version cannot read")
    drawing = drawing_of(row, spec)
    if run_id:
        selected: RunRow | None = await run_or_404(store, dag_id, run_id)
    else:
        latest = await store.list_runs(dag_id=dag_id, limit=1)
        selected = latest[0] if latest else None
    states = {}
    gone: frozenset[str] = frozenset()
    if selected is not None:
        states = (await store.task_states_of_runs([selected.pk])).get(selected.pk, {})
        gone = (await cancelled_tasks(store, [selected.pk])).get(selected.pk, frozenset())
    mapped = mapped_tasks(spec)
    return {
        "dag": row,
        "layout": drawing.layout,
        "edges": drawing.edges,
        "nodes": graph_nodes(drawing.layout, dag_id, selected, states, mapped, gone),
    }
