"""What the backfill pages show: a DAG's backfills with their progress, and one
backfill with a page of its points and their runs.

Both read through the store's backfill queries (``leoflow.store.backfill_pages``):
the list's progress in one grouped statement, a backfill's points with their runs
in one join, paged by logical date. Creating and cancelling go through the API's
own route functions (``actions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

from leoflow.api.context import ApiContext
from leoflow.api.lookup import dag_or_404, spec_of
from leoflow.store.backfill_pages import (
    BackfillPoint,
    backfill_points_with_runs,
    progress_of,
)
from leoflow.store.backfills import BackfillProgress, BackfillRow, get_backfill, list_backfills

BACKFILLS_SHOWN = 50
POINTS_PAGE = 100


@dataclass(frozen=True)
class BackfillLine:
    row: BackfillRow
    progress: BackfillProgress

    @property
    def percent(self) -> int:
        total = self.progress.total
        return 100 if total == 0 else round(100 * self.progress.done / total)

    @property
    def counts(self) -> list[tuple[str, int]]:
        """Per-state counts, the zero ones left out (``pending``: no run made yet)."""
        p = self.progress
        pairs = [
            ("success", p.success),
            ("failed", p.failed),
            ("running", p.running),
            ("queued", p.queued),
            ("pending", p.pending),
        ]
        return [(state, n) for state, n in pairs if n]


async def backfills_view(ctx: ApiContext, dag_id: str) -> dict[str, Any]:
    row = await dag_or_404(ctx.store, dag_id)
    spec = spec_of(row)
    rows = await list_backfills(ctx.store, dag_id=dag_id, limit=BACKFILLS_SHOWN)
    progress = await progress_of(ctx.store, [r.pk for r in rows])
    return {
        "dag": row,
        "spec": spec,
        "lines": [BackfillLine(r, progress[r.pk]) for r in rows],
        "shown_max": BACKFILLS_SHOWN,
        "can_backfill": spec is not None and spec.schedule is not None and row.active,
    }


def parse_pk(raw: str) -> int:
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise HTTPException(404, f"no backfill {raw!r}")
    return int(raw)


async def backfill_view(
    ctx: ApiContext, dag_id: str, raw_pk: str, after: float | None
) -> dict[str, Any]:
    pk = parse_pk(raw_pk)
    row = await get_backfill(ctx.store, pk)
    if row is None or row.dag_id != dag_id:
        raise HTTPException(404, f"no backfill {pk} of DAG {dag_id!r}")
    progress = (await progress_of(ctx.store, [pk]))[pk]
    points: list[BackfillPoint] = await backfill_points_with_runs(
        ctx.store, pk, after=after, limit=POINTS_PAGE + 1
    )
    more = points[POINTS_PAGE - 1].logical_date if len(points) > POINTS_PAGE else None
    return {
        "bf": row,
        "line": BackfillLine(row, progress),
        "points": points[:POINTS_PAGE],
        "more": more,
        "after": after,
        "running": row.state == "running",
    }
