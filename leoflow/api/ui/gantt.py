"""A run's Gantt page (``/dags/ID/runs/RUN/gantt``): every try of every task instance
as a bar, its wait (queued → started) pale and its run (started → ended) in its state's
colour, each bar a link to that try's page. One SVG string, built like the graph
(``fragments``): a 1,000-task run is 1,000 rows in one statement's worth of rows."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

from markupsafe import Markup

from leoflow.api.context import ApiContext
from leoflow.api.lookup import run_or_404
from leoflow.api.ui.present import task_url
from leoflow.domain.gantt import (
    AXIS_HEIGHT,
    LABEL_WIDTH,
    ROW_HEIGHT,
    Bar,
    GanttLayout,
    TrySpan,
    layout_gantt,
)
from leoflow.domain.task_instance import TaskInstance
from leoflow.store.tries import TryRow

_LABEL_CHARS = 28


def _span(task_id: str, t: TryRow | TaskInstance, try_number: int, state: str) -> TrySpan:
    return TrySpan(task_id, try_number, state, t.queued_at, t.started_at, t.ended_at)


def _tick_label(at: float, span: float) -> str:
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%H:%M:%S" if span < 86400 else "%m-%d %H:%M")


def _iso(at: float) -> str:
    # The page writes the tick again in the zone the viewer chose.
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_BAR = ROW_HEIGHT - 6


def _timing(bar: Bar) -> str:
    parts = []
    if bar.queued_at is not None and bar.started_at is not None:
        parts.append(f"waited {span_words(bar.started_at - bar.queued_at)}")
    if bar.started_at is not None:
        if bar.ended_at is not None:
            parts.append(f"ran {span_words(bar.ended_at - bar.started_at)}")
        else:
            parts.append("running")
    return f" ({', '.join(parts)})" if parts else ""


def span_words(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def gantt_svg(layout: GanttLayout, dag_id: str, run_id: str) -> Markup:
    """The chart as one ``<svg>`` (empty text when nothing has been tried yet)."""
    if not layout.bars:
        return Markup("")
    out = [
        f'<svg class="gantt" role="group" aria-labelledby="gantt-title" width="{layout.width}" '
        f'height="{layout.height}" viewBox="0 0 {layout.width} {layout.height}">'
        '<title id="gantt-title">Gantt chart of the run\'s tries</title>'
    ]
    span = (layout.ticks[-1].at - layout.ticks[0].at) if len(layout.ticks) > 1 else 0.0
    for tick in layout.ticks:
        out.append(
            f'<line class="tick" x1="{tick.x}" y1="{AXIS_HEIGHT - 4}" x2="{tick.x}" '
            f'y2="{layout.height}"/><text class="tick-label" x="{tick.x}" y="14" '
            f'data-at="{_iso(tick.at)}" data-long="{int(span >= 86400)}" '
            f'text-anchor="middle">{_tick_label(tick.at, span)}</text>'
        )
    for i, task in enumerate(layout.rows):
        y = AXIS_HEIGHT + i * ROW_HEIGHT
        label = task if len(task) <= _LABEL_CHARS else task[: _LABEL_CHARS - 1] + "\u2026"
        out.append(
            f'<text class="row-label" x="{LABEL_WIDTH - 8}" y="{y + ROW_HEIGHT * 0.7}" '
            f'text-anchor="end">{escape(label)}'
            + (f"<title>{escape(task)}</title>" if label != task else "")
            + "</text>"
        )
    for bar in layout.bars:
        y = AXIS_HEIGHT + bar.row * ROW_HEIGHT + 3
        task = escape(bar.task_id)
        # Durations, not three timestamps a bar: a 1,000-task chart's markup is mostly
        # these words (the try's page has the times).
        words = f"{task} try {bar.try_number}: {bar.state}{_timing(bar)}"
        href = task_url(dag_id, run_id, bar.task_id, bar.try_number)
        out.append(
            f'<a href="{href}" class="gantt-try" data-task="{task}" '
            f'data-try="{bar.try_number}"><title>{words}</title>'
        )
        run_x = bar.run_x if bar.run_x is not None else bar.end_x
        if bar.wait_x is not None and run_x > bar.wait_x:
            out.append(
                f'<rect class="wait" x="{bar.wait_x}" y="{y}" '
                f'width="{round(run_x - bar.wait_x, 1)}" height="{_BAR}"/>'
            )
        if bar.run_x is not None:
            width = max(1.0, round(bar.end_x - bar.run_x, 1))
            out.append(
                f'<rect class="run s-{bar.state}" x="{bar.run_x}" y="{y}" width="{width}" '
                f'height="{_BAR}" rx="2"/>'
            )
        out.append("</a>")
    out.append("</svg>")
    return Markup("".join(out))


async def gantt_view(ctx: ApiContext, dag_id: str, run_id: str) -> dict[str, Any]:
    store = ctx.store
    run = await run_or_404(store, dag_id, run_id)
    tis = await store.list_task_instances(run_pk=run.pk)
    spans = [
        _span(task, t, t.try_number, t.state) for task, t in await store.list_run_tries(run.pk)
    ]
    spans += [
        _span(ti.task_id, ti, ti.try_number, ti.state.value) for ti in tis if ti.try_number >= 1
    ]
    spans += [
        TrySpan(ti.task_id, 0, ti.state.value, None, None, None) for ti in tis if ti.try_number < 1
    ]
    layout = layout_gantt(spans, ctx.clock())
    return {
        "run": run,
        "gantt": gantt_svg(layout, dag_id, run_id),
        "tries": len(layout.bars),
        "rows": len(layout.rows),
        "untried": sum(1 for ti in tis if ti.try_number < 1),
    }
