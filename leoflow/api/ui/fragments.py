"""The DAG page's two big pieces, the graph and the grid, built as markup in Python.

A 300-task DAG has 300 nodes, ~300 edges and 1,200 grid squares: as Jinja macros
they cost most of the page's time. Here each is one f-string with its text
escaped; the edges depend on the spec only, so they are cached with its layout.
The markup is the one the templates used to make (the browser tests read its
``data-task``/``data-state`` attributes and classes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

from leoflow.api.ui.present import STATE_ICON, dag_url, quoted, run_url, task_url
from leoflow.domain.cancelled import CANCELLED, shown_run_state
from leoflow.domain.dag import DagSpec
from leoflow.domain.graph_layout import EdgePath, GraphLayout, layout_graph
from leoflow.domain.mapped_states import fold_items
from leoflow.domain.progress import topological_order
from leoflow.domain.states import TaskState
from leoflow.store.rows import DagRow, RunRow

_LABEL_CHARS = 20
# Said in a run square's title and label when the run missed its deadline.
LATE_WORDS = ", missed its deadline"
_KEPT = 64


@dataclass(frozen=True)
class Drawing:
    """A spec's layout, task order and the markup of its edges (no run changes them)."""

    layout: GraphLayout
    order: tuple[str, ...]
    edges: Markup


_DRAWINGS: OrderedDict[str, Drawing] = OrderedDict()


def _edge_path(e: EdgePath) -> str:
    parts = []
    for i, p in enumerate(e.points):
        if i == 0:
            parts.append(f"M{p[0]},{p[1]}")
            continue
        q = e.points[i - 1]
        mid = (q[0] + p[0]) / 2
        parts.append(f" C{mid},{q[1]} {mid},{p[1]} {p[0]},{p[1]}")
    return f'<path class="edge" marker-end="url(#arrow)" d="{"".join(parts)}"/>'


def drawing_of(row: DagRow, spec: DagSpec) -> Drawing:
    cached = _DRAWINGS.get(row.spec_hash)
    if cached is None:
        layout = layout_graph({t.task_id: t.depends_on for t in spec.tasks.values()})
        cached = Drawing(
            layout, topological_order(spec), Markup("\n".join(_edge_path(e) for e in layout.edges))
        )
        _DRAWINGS[row.spec_hash] = cached
        while len(_DRAWINGS) > _KEPT:
            _DRAWINGS.popitem(last=False)
    else:
        _DRAWINGS.move_to_end(row.spec_hash)
    return cached


def items_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The run page listing the items of mapped task ``task_id``."""
    return f"{run_url(dag_id, run_id)}?mapped={quoted(task_id)}"


def graph_nodes(
    layout: GraphLayout,
    dag_id: str,
    run: RunRow | None,
    states: Mapping[str, TaskState],
    mapped: Collection[str] = (),
    cancelled: Collection[str] = (),
) -> Markup:
    """Each node coloured and labelled by its state in ``run`` (``none`` without one);
    a mapped task by its items' worst state, its title counting them, its link to
    their list."""
    items = fold_items(states, mapped)
    out = []
    for n in layout.nodes:
        state = states.get(n.task_id)
        folded = items.get(n.task_id) if state is None else None
        if folded is not None:
            state = folded.worst
        st = state.value if state is not None else "none"
        if n.task_id in cancelled:
            st = CANCELLED
        task = escape(n.task_id)
        words = escape(folded.words()) if folded is not None else st
        href = ""
        if run is not None:
            url = (
                items_url(dag_id, run.run_id, n.task_id)
                if folded is not None
                else task_url(dag_id, run.run_id, n.task_id)
            )
            href = f' href="{url}"'
        label = n.task_id if len(n.task_id) <= _LABEL_CHARS else n.task_id[:19] + "\u2026"
        if folded is not None:
            label = f"{label} \u00d7{folded.total}"
        out.append(
            f'<a{href} class="node-link" data-task="{task}" aria-label="{task}: {words}">'
            f'<g class="node s-{st}" data-task="{task}" data-state="{st}" '
            f'transform="translate({n.x},{n.y})"><title>{task}: {words}</title>'
            f'<rect width="{n.width}" height="{n.height}" rx="6"/>'
            f'<text class="ic" x="14" y="{n.height / 2 + 5}" text-anchor="middle">'
            f"{STATE_ICON.get(st, '?')}</text>"
            f'<text class="label" x="28" y="{n.height / 2 + 4.5}">{escape(label)}</text></g></a>'
        )
    return Markup("\n".join(out))


@dataclass
class GridColumn:
    run: RunRow
    states: dict[str, TaskState] = field(default_factory=dict)
    # Its task instances a cancel failed: shown as cancelled, not failed.
    cancelled: frozenset[str] = frozenset()


Cell = tuple[str, str]  # (task, run id): one square of the grid


def grid_cells(
    dag_id: str,
    order: Sequence[str],
    columns: Sequence[GridColumn],
    mapped: Collection[str] = (),
) -> dict[Cell, str]:
    """A square per (task, run) of ``order``: its state as colour, icon and words; a
    mapped task's square shows its items' worst state and counts them. The live
    updates send the squares that changed, not the grid."""
    prefixes = [(f"{dag_url(dag_id)}/runs/{quoted(c.run.run_id)}/tasks/", c) for c in columns]
    # Escaped once per task and per run, not per square; a quoted URL has no
    # character HTML would need escaped.
    runs = [escape(c.run.run_id) for c in columns]
    folded = [fold_items(c.states, mapped) if mapped else {} for c in columns]
    out: dict[Cell, str] = {}
    for t in order:
        task, link = escape(t), quoted(t)
        for (prefix, c), run, items in zip(prefixes, runs, folded, strict=True):
            state = c.states.get(t)
            summary = items.get(t) if state is None else None
            if summary is not None:
                words = escape(summary.words())
                href = items_url(dag_id, c.run.run_id, t)
                cell = _square(summary.worst.value, href, f"{task} in {run}: {words}")
            elif state is None:
                cell = '<td><span class="sq s-none" title="not in this run">·</span></td>'
            else:
                st = CANCELLED if t in c.cancelled else state.value
                cell = _square(st, f"{prefix}{link}", f"{task} in {run}: {st}")
            out[(t, c.run.run_id)] = cell
    return out


def grid_rows(
    order: Sequence[str], columns: Sequence[GridColumn], cells: Mapping[Cell, str]
) -> Markup:
    """A row per task of ``order``, its squares from ``grid_cells``."""
    rows = []
    for t in order:
        squares = "".join(cells[(t, c.run.run_id)] for c in columns)
        rows.append(f'<tr><th scope="row" class="task-col">{escape(t)}</th>{squares}</tr>')
    return Markup("\n".join(rows))


def _square(st: str, href: str, label: str) -> str:
    return (
        f'<td><a class="sq s-{st}" href="{href}" title="{label}" '
        f'aria-label="{label}">{STATE_ICON.get(st, "?")}</a></td>'
    )


def run_squares(dag_id: str, runs: Sequence[RunRow]) -> Markup:
    """A DAG's last runs as squares (the DAGs page): state as colour, icon and words."""
    if not runs:
        return Markup('<span class="muted">no runs yet</span>')
    prefix = f"{dag_url(dag_id)}/runs/"
    out = []
    for r in runs:
        st, run = shown_run_state(r.state, r.message), escape(r.run_id)
        late, words = ("", "") if r.deadline_missed_at is None else (" late", LATE_WORDS)
        out.append(
            f'<a class="sq s-{st}{late}" href="{prefix}{quoted(r.run_id)}" '
            f'title="{run}: {st}{words}" aria-label="{run}: {st}{words}">'
            f"{STATE_ICON.get(st, '?')}</a>"
        )
    return Markup("".join(out))
