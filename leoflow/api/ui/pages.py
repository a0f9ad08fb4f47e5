"""The pages: which path is which page, its context, and its live regions.

A page template marks its live parts as Jinja blocks inside ``data-live``
elements; ``/ui/events`` renders the same blocks again when they change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import unquote

import jinja2
from fastapi import HTTPException

from leoflow.api.context import ApiContext
from leoflow.api.ui import (
    asset_views,
    backfill_views,
    gantt,
    present,
    run_list_views,
    run_views,
    views,
    waiting,
)
from leoflow.api.ui.grid_window import GridWindow
from leoflow.api.ui.session import Session
from leoflow.api.ui.timed import timed
from leoflow.domain.states import TASK_TERMINAL

Build = Callable[[ApiContext, Session, list[str], Mapping[str, str]], Awaitable[dict[str, Any]]]


def _int(query: Mapping[str, str], name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"query parameter {name!r}: expected an integer") from None
    if not lo <= value <= hi:
        raise HTTPException(400, f"query parameter {name!r}: expected {lo}..{hi}")
    return value


async def _dags(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    state = q.get("state", "all")
    if state not in views.DAG_FILTERS:
        raise HTTPException(400, f"query parameter 'state': expected one of {views.DAG_FILTERS}")
    return await views.dags_view(
        ctx, q.get("q", "")[:200], state, _int(q, "page", 1, 1, 10**6) or 1
    )


async def _dag(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    runs = _int(q, "runs", None, 1, 50)
    before = _int(q, "before", None, 1, 2**62)
    rows = GridWindow(page=_int(q, "rows", 1, 1, 10**6) or 1, q=q.get("tasks", "")[:200])
    context = await views.dag_view(ctx, a[0], q.get("run") or None, before, runs, rows)
    return context | await asset_views.dag_waiting(ctx, a[0], s.principal)


async def _run(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    return await run_views.run_view(ctx, a[0], a[1], _int(q, "after", None, 0, 2**62), q)


async def _runs(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    return await run_list_views.runs_view(ctx, a[0] if a else None, q)


async def _gantt(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    return await gantt.gantt_view(ctx, a[0], a[1])


async def _task(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    try_number = _int(q, "try", None, 1, 1_000_000)
    return await views.task_view(ctx, s.principal, a[0], a[1], a[2], try_number)


async def _backfills(
    ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]
) -> dict[str, Any]:
    return await backfill_views.backfills_view(ctx, a[0])


async def _backfill(
    ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]
) -> dict[str, Any]:
    raw = q.get("after") or None
    try:
        after = None if raw is None else float(raw)
    except ValueError:
        raise HTTPException(400, "query parameter 'after': expected a number") from None
    return await backfill_views.backfill_view(ctx, a[0], a[1], after)


async def _waiting(
    ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]
) -> dict[str, Any]:
    return await waiting.waiting_view(ctx)


async def _pools(ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]) -> dict[str, Any]:
    return await waiting.pools_view(ctx, s.principal)


async def _assets(
    ctx: ApiContext, s: Session, a: list[str], q: Mapping[str, str]
) -> dict[str, Any]:
    if a == ["one"]:
        return await asset_views.asset_view(ctx, q.get("uri"))
    if a == ["lineage"]:
        return await asset_views.lineage_view(ctx)
    return await asset_views.assets_view(ctx)


@dataclass(frozen=True)
class Page:
    name: str
    template: str
    build: Build
    regions: tuple[str, ...]


PAGES = {
    "dags": Page("dags", "dags.html", _dags, ("dag_rows",)),
    "dag": Page("dag", "dag.html", _dag, ("dag_head", "run_pick", "grid")),
    "run": Page("run", "run.html", _run, ("run_head", "run_tasks")),
    "task": Page("task", "task.html", _task, ("task_head", "tries")),
    "gantt": Page("gantt", "gantt.html", _gantt, ("gantt_chart",)),
    "runs": Page("runs", "runs.html", _runs, ()),
    "backfills": Page("backfills", "backfills.html", _backfills, ("bf_rows",)),
    "backfill": Page("backfill", "backfill.html", _backfill, ("bf_head", "bf_points")),
    "waiting": Page("waiting", "waiting.html", _waiting, ("wait_groups",)),
    "pools": Page("pools", "pools.html", _pools, ("pool_bars",)),
    "assets": Page("assets", "assets.html", _assets, ("asset_rows",)),
    "asset": Page("asset", "asset.html", _assets, ("asset_head", "asset_events")),
    "lineage": Page("lineage", "lineage.html", _assets, ()),
}

# Pages about one DAG: their first path argument is its id.
ONE_DAG_PAGES = frozenset({"dag", "run", "task", "gantt", "backfills", "backfill"})


def resolve(path: str) -> tuple[Page, list[str]] | None:
    """The page a UI path names and its path arguments (decoded)."""
    parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    n = len(parts)
    if n == 0:
        return PAGES["dags"], []
    if n == 1 and parts[0] in ("waiting", "pools"):
        return PAGES[parts[0]], []
    if n == 1 and parts[0] == "runs":
        return PAGES["runs"], []
    if parts[0] == "assets" and n <= 2:
        which = {1: "assets", 2: {"one": "asset", "lineage": "lineage"}.get(parts[-1])}[n]
        return (PAGES[which], parts[1:]) if which else None
    if parts[0] != "dags":
        return None
    if n == 2:
        return PAGES["dag"], parts[1:]
    if n == 3 and parts[2] == "runs":
        return PAGES["runs"], parts[1:2]
    if n == 3 and parts[2] == "backfills":
        return PAGES["backfills"], parts[1:2]
    if n == 4 and parts[2] == "backfills":
        return PAGES["backfill"], [parts[1], parts[3]]
    if n == 4 and parts[2] == "runs":
        return PAGES["run"], [parts[1], parts[3]]
    if n == 5 and parts[2] == "runs" and parts[4] == "gantt":
        return PAGES["gantt"], [parts[1], parts[3]]
    if n == 6 and parts[2] == "runs" and parts[4] == "tasks":
        return PAGES["task"], [parts[1], parts[3], parts[5]]
    return None


def _state_icon(state: object) -> str:
    value = getattr(state, "value", state)
    return present.STATE_ICON.get(str(value), "?")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(
        dag_url=present.dag_url,
        run_url=present.run_url,
        task_url=present.task_url,
        backfill_url=present.backfill_url,
        span=present.span,
        iso=present.iso,
        duration=present.duration,
        icon=_state_icon,
        icons=present.STATE_ICON,
        quoted=present.quoted,
        terminal_states=TASK_TERMINAL,
        run_state=present.run_state,
        ti_state=present.ti_state,
        run_date=present.run_date,
        seconds=present.run_seconds,
        short_date=present.short_date,
    )
    env.filters["sv"] = lambda state: getattr(state, "value", state)
    env.filters["timed"] = timed
    # Global, so that a block rendered on its own (a live region) sees the macros too.
    env.globals["m"] = env.get_template("macros.html").module
    return env


def _load_template(name: str) -> str:
    return resources.files("leoflow.api.ui").joinpath("templates", name).read_text("utf-8")


ENV = _env()


def render_page(page: Page, context: dict[str, Any]) -> str:
    return ENV.get_template(page.template).render(context)


def render_regions(page: Page, context: dict[str, Any]) -> dict[str, str]:
    template = ENV.get_template(page.template)
    ctx = template.new_context(context)
    return {name: "".join(template.blocks[name](ctx)) for name in page.regions}
