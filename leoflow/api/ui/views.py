"""What each page shows, read through the API's own functions and its store context.

Each ``*_view`` returns the template context of one page; the live updates render
the same context's regions again, so a page and its updates cannot disagree.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import HTTPException

from leoflow.api import pools as pools_api
from leoflow.api import tasks as tasks_api
from leoflow.api.auth import Principal, Role
from leoflow.api.context import ApiContext
from leoflow.api.lookup import dag_or_404, run_or_404, spec_of, task_or_404
from leoflow.api.snapshot import admission_snapshot
from leoflow.domain.dag import DagSpec
from leoflow.domain.durations import format_duration
from leoflow.domain.explain import admission_for
from leoflow.domain.graph_layout import GraphLayout, layout_graph
from leoflow.domain.progress import topological_order
from leoflow.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from leoflow.store.rows import DagRow, RunRow, TaskInstanceRow

DAGS_PAGE = 25
LAST_RUNS = 8
GRID_RUNS = 12
GRID_CELLS = 1200
TASKS_PAGE = 100
WAITING_SHOWN = 50
_ACTIVE_LIMIT = 1_000_000

STATE_ICON = {
    "success": "\u2713",
    "failed": "\u2717",
    "running": "\u25b6",
    "queued": "\u2026",
    "scheduled": "\u25f7",
    "up_for_retry": "\u21bb",
    "upstream_failed": "\u2298",
    "skipped": "\u00bb",
    "none": "\u25cb",
}

EXIT_WORDS = {
    "success": "succeeded",
    "exit_code": "exited with a non-zero code",
    "timeout": "timed out",
    "oom": "ran out of memory",
    "evicted": "was evicted by the kubelet",
    "lost": "was lost: its process or pod went away without reporting",
    "cancelled": "was cancelled",
    "upstream_failed": "did not run: an upstream task failed",
    "image_pull": "could not start: its image could not be pulled",
    "launch_failed": "could not start: its container could not be created",
    "secret": "failed: a secret it asked for could not be resolved",
}


def quoted(value: str) -> str:
    return quote(value, safe="")


def dag_url(dag_id: str) -> str:
    return f"/dags/{quoted(dag_id)}"


def run_url(dag_id: str, run_id: str) -> str:
    return f"{dag_url(dag_id)}/runs/{quoted(run_id)}"


def task_url(dag_id: str, run_id: str, task_id: str, try_number: int | None = None) -> str:
    url = f"{run_url(dag_id, run_id)}/tasks/{quoted(task_id)}"
    return url if try_number is None else f"{url}?try={try_number}"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(start: float | None, end: float | None, now: float) -> str:
    if start is None:
        return ""
    return format_duration(max(0.0, (end if end is not None else now) - start))


def exit_words(ti: TaskInstanceRow) -> str:
    if ti.reason is None:
        return ""
    words = EXIT_WORDS.get(ti.reason, ti.reason.replace("_", " "))
    if ti.reason == "exit_code" and ti.exit_code is not None:
        words = f"exited with code {ti.exit_code}"
    return words


def pod_of(ti: TaskInstanceRow) -> str | None:
    ref = ti.executor_ref or ""
    if ref.startswith("pod:"):
        return ref[4:].split("@", 1)[0]
    return None


@dataclass
class Viewer:
    principal: Principal
    csrf: str
    auth_enabled: bool

    @property
    def can_operate(self) -> bool:
        return self.principal.role >= Role.OPERATOR

    @property
    def can_admin(self) -> bool:
        return self.principal.role >= Role.ADMIN


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
    rows = [r for r in await store.list_dags() if r.active or r.last_error]
    errors = await store.list_dag_errors()
    active = await store.list_runs(states=[RunState.QUEUED, RunState.RUNNING], limit=_ACTIVE_LIMIT)
    counts = Counter((r.dag_id, r.state) for r in active)
    needle = q.strip().lower()
    if needle:
        rows = [r for r in rows if needle in r.dag_id.lower()]
    if state == "active":
        rows = [r for r in rows if not r.paused]
    elif state == "paused":
        rows = [r for r in rows if r.paused]
    elif state == "running":
        rows = [r for r in rows if counts[(r.dag_id, RunState.RUNNING)]]
    rows.sort(key=lambda r: r.dag_id)
    lines: list[DagLine] = []
    if state == "failing":
        # Needs each DAG's last run: read them all, then page.
        candidates = []
        for row in rows:
            last = await store.list_runs(dag_id=row.dag_id, limit=1)
            if last and last[0].state is RunState.FAILED:
                candidates.append(row)
        rows = candidates
    total = len(rows)
    pages = max(1, -(-total // DAGS_PAGE))
    page = min(max(1, page), pages)
    for row in rows[(page - 1) * DAGS_PAGE : page * DAGS_PAGE]:
        spec = spec_of(row)
        runs = await store.list_runs(dag_id=row.dag_id, limit=LAST_RUNS)
        lines.append(
            DagLine(
                row,
                spec,
                list(reversed(runs)),
                counts[(row.dag_id, RunState.RUNNING)],
                counts[(row.dag_id, RunState.QUEUED)],
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

_LAYOUTS: OrderedDict[str, GraphLayout] = OrderedDict()


def layout_of(row: DagRow, spec: DagSpec) -> GraphLayout:
    cached = _LAYOUTS.get(row.spec_hash)
    if cached is None:
        cached = layout_graph({t.task_id: t.depends_on for t in spec.tasks.values()})
        _LAYOUTS[row.spec_hash] = cached
        while len(_LAYOUTS) > 64:
            _LAYOUTS.popitem(last=False)
    return cached


@dataclass
class GridColumn:
    run: RunRow
    states: dict[str, TaskInstanceRow] = field(default_factory=dict)


async def dag_view(
    ctx: ApiContext, dag_id: str, run_id: str | None, before: int | None, runs: int | None
) -> dict[str, Any]:
    store = ctx.store
    row = await dag_or_404(store, dag_id)
    spec = spec_of(row)
    if spec is None:
        raise HTTPException(409, f"DAG {dag_id!r} has a stored spec this version cannot read")
    # A wide DAG shows fewer runs by default, so the grid stays near GRID_CELLS squares.
    runs_shown = runs or max(3, min(GRID_RUNS, GRID_CELLS // max(1, len(spec.tasks))))
    layout = layout_of(row, spec)
    fetched = await store.list_runs(dag_id=dag_id, limit=runs_shown + 1, before_pk=before)
    older = fetched[runs_shown].pk + 1 if len(fetched) > runs_shown else None
    shown = fetched[:runs_shown]
    columns = [GridColumn(r) for r in reversed(shown)]
    for col in columns:
        col.states = {ti.task_id: ti for ti in await store.list_task_instances(run_pk=col.run.pk)}
    selected: RunRow | None = None
    if run_id:
        selected = await run_or_404(store, dag_id, run_id)
    elif shown:
        selected = shown[0] if before is None else None
    if selected is None and run_id is None:
        latest = await store.list_runs(dag_id=dag_id, limit=1)
        selected = latest[0] if latest else None
    selected_states: dict[str, TaskInstanceRow] = {}
    if selected is not None:
        found = next((c for c in columns if c.run.pk == selected.pk), None)
        if found is not None:
            selected_states = found.states
        else:
            selected_states = {
                ti.task_id: ti for ti in await store.list_task_instances(run_pk=selected.pk)
            }
    return {
        "dag": row,
        "spec": spec,
        "layout": layout,
        "order": topological_order(spec),
        "columns": columns,
        "selected": selected,
        "follow_latest": run_id is None,
        "selected_states": selected_states,
        "older": older,
        "newer": before is not None,
        "runs_shown": runs_shown,
        "next_run": _next_run(spec, row.paused, ctx.clock()),
    }


# -------------------------------------------------------------------------------- a run


async def run_view(ctx: ApiContext, dag_id: str, run_id: str, after: int | None) -> dict[str, Any]:
    store = ctx.store
    run = await run_or_404(store, dag_id, run_id)
    tis = await store.list_task_instances(run_pk=run.pk, limit=TASKS_PAGE + 1, after_pk=after)
    more = tis[TASKS_PAGE - 1].pk if len(tis) > TASKS_PAGE else None
    tis = tis[:TASKS_PAGE]
    dag = await store.get_dag(dag_id)
    spec = spec_of(dag) if dag is not None else None
    return {
        "run": run,
        "tis": tis,
        "more": more,
        "after": after,
        "spec": spec,
        "run_over": run.state in RUN_TERMINAL,
        "terminal": TASK_TERMINAL,
        "counts": Counter(ti.state.value for ti in tis),
    }


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
    run, ti, _ = await task_or_404(store, dag_id, run_id, task_id)
    why = None
    if ti.state not in TASK_TERMINAL:
        why = await tasks_api.why_waiting(dag_id, run_id, task_id, ctx, who)
    chosen = ti.try_number if try_number is None else max(1, min(try_number, ti.try_number))
    live = chosen == ti.try_number and ti.state in (TaskState.QUEUED, TaskState.RUNNING)
    return {
        "run": run,
        "ti": ti,
        "why": why,
        "tries": list(range(1, ti.try_number + 1)),
        "chosen_try": chosen,
        "pinned": try_number is not None,
        "log_live": live,
        "exit_words": exit_words(ti),
        "pod": pod_of(ti),
        "pro": ctx.settings.executor == "kubernetes",
        "run_over": run.state in RUN_TERMINAL,
        "terminal": TASK_TERMINAL,
    }


# ---------------------------------------------------------------------------- waiting


@dataclass
class WaitGroup:
    key: str
    title: str
    detail: str
    items: list[tuple[TaskInstanceRow, str]] = field(default_factory=list)
    runs: list[RunRow] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.items) + len(self.runs)


_GROUP_TITLES = {
    "pool_missing": "pool {pool} does not exist",
    "pool_too_small": "pool {pool} is too small",
    "pool_slots": "pool {pool} is full",
    "dag_max_active_tasks": "DAG {dag}: max_active_tasks",
    "parallelism": "parallelism",
    "ready": "ready: starts at the next admission round",
}


async def waiting_view(ctx: ApiContext) -> dict[str, Any]:
    store = ctx.store
    now = ctx.clock()
    snapshot = await admission_snapshot(store, ctx.settings)
    admission = admission_for(snapshot)
    scheduled = await store.list_task_instances(states=[TaskState.SCHEDULED])
    groups: dict[str, WaitGroup] = {}

    def group(key: str, title: str, detail: str = "") -> WaitGroup:
        if key not in groups:
            groups[key] = WaitGroup(key, title, detail)
        return groups[key]

    for ti in scheduled:
        if admission.is_held(ti.pk):
            group("next_tick", "admitted on the scheduler's next tick").items.append((ti, ""))
            continue
        why = admission.why(ti.pk)
        if why is None:
            continue
        title = _GROUP_TITLES.get(why.reason, why.reason).format(pool=ti.pool, dag=ti.dag_id)
        key = f"{why.reason}:{ti.pool if why.reason.startswith('pool') else ti.dag_id}"
        if why.reason == "parallelism":
            key = "parallelism"
        detail = why.message.split(";")[0] if why.reason != "ready" else ""
        group(key, title, detail).items.append((ti, why.message))
    queued = await store.list_task_instances(states=[TaskState.QUEUED])
    for ti in queued:
        group("launching", "admitted, waiting for the executor to start it").items.append(
            (ti, f"holds {ti.pool_slots} slot(s) of pool {ti.pool}")
        )
    retrying = await store.list_task_instances(states=[TaskState.UP_FOR_RETRY])
    for ti in retrying:
        due = ti.next_retry_at
        text = f"try {ti.try_number + 1} of {ti.max_tries}" + (
            f" in {format_duration(due - now)}" if due and due > now else " is due"
        )
        group("retry", "waiting for a retry delay").items.append((ti, text))
    runs = await store.list_runs(states=[RunState.QUEUED], limit=_ACTIVE_LIMIT)
    running = Counter(
        r.dag_id for r in await store.list_runs(states=[RunState.RUNNING], limit=_ACTIVE_LIMIT)
    )
    for r in sorted(runs, key=lambda r: (r.dag_id, r.created_at, r.pk)):
        row = await store.get_dag(r.dag_id)
        spec = spec_of(row) if row is not None else None
        cap = spec.max_active_runs if spec else 1
        g = group(
            f"runs:{r.dag_id}",
            f"DAG {r.dag_id}: max_active_runs",
            f"{running[r.dag_id]} of {cap} max_active_runs running",
        )
        g.runs.append(r)
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.key))
    return {
        "groups": ordered,
        "shown": WAITING_SHOWN,
        "total": sum(g.count for g in ordered),
    }


# ------------------------------------------------------------------------------ pools


async def pools_view(ctx: ApiContext, who: Principal) -> dict[str, Any]:
    listed = await pools_api.list_pools(ctx, who)
    return {"pools": listed.pools}


def now_iso() -> str:
    return iso(time.time()) or ""
