"""The DAG page's grid at 1,000 tasks: a window of rows (a page of tasks in graph
order, optionally those whose id holds a search string), so the page stays small
and the browser lays out a few hundred squares, not thousands. A big DAG's graph
is fetched after the page paints (``GRAPH_INLINE``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from leoflow.api.ui.fragments import GridColumn

# Rows of the grid a page shows; the rest are a click (or a search) away.
GRID_ROWS = 100
# Above this many tasks the graph is not inlined in the page but fetched after it.
GRAPH_INLINE = 300


@dataclass(frozen=True)
class GridWindow:
    """Which rows: page ``page`` (from 1) of the tasks whose id contains ``q``."""

    page: int = 1
    q: str = ""
    size: int = GRID_ROWS
    tasks: tuple[str, ...] = ()
    total: int = 0
    matching: int = 0
    pages: int = 1
    first: int = 0
    searched: bool = field(default=False)

    def over(self, order: Sequence[str]) -> GridWindow:
        needle = self.q.strip().lower()
        chosen = [t for t in order if needle in t.lower()] if needle else list(order)
        pages = max(1, -(-len(chosen) // self.size))
        page = min(max(1, self.page), pages)
        first = (page - 1) * self.size
        return GridWindow(
            page=page,
            q=self.q,
            size=self.size,
            tasks=tuple(chosen[first : first + self.size]),
            total=len(order),
            matching=len(chosen),
            pages=pages,
            first=first,
            searched=bool(needle),
        )

    @property
    def windowed(self) -> bool:
        return self.searched or self.pages > 1


def grid_shape(
    columns: Sequence[GridColumn], window: GridWindow, older: int | None, before: int | None
) -> str:
    """What the grid's frame depends on, squares aside: while it stays the same a live
    update sends the squares that changed, not the grid."""
    frame = [
        [c.run.run_id, c.run.state.value, c.run.deadline_missed_at, c.run.created_at]
        for c in columns
    ]
    text = json.dumps([frame, window.tasks, window.page, window.q, older, before])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
