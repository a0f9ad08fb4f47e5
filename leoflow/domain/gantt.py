"""A run's Gantt chart as geometry: a row per task instance, a bar per try (queued →
started as its wait, started → ended as its run), a time axis with round ticks. Pure;
the web UI draws it as SVG (``leoflow.api.ui.gantt``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LABEL_WIDTH = 200.0
ROW_HEIGHT = 20.0
AXIS_HEIGHT = 24.0
# Round steps for the axis, in seconds: 1 s up to a day.
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400)


@dataclass(frozen=True, slots=True)
class TrySpan:
    """When one try waited and ran (None: not yet)."""

    task_id: str
    try_number: int
    state: str
    queued_at: float | None
    started_at: float | None
    ended_at: float | None


@dataclass(frozen=True, slots=True)
class Bar:
    row: int
    task_id: str
    try_number: int
    state: str
    wait_x: float | None  # where its wait begins (queued), if known
    run_x: float | None  # where its run begins (started), if it started
    end_x: float  # where it ends (now, if it has not)
    running: bool
    queued_at: float | None
    started_at: float | None
    ended_at: float | None


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    at: float


@dataclass(frozen=True, slots=True)
class GanttLayout:
    rows: tuple[str, ...]
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]
    width: float
    height: float
    start: float | None  # the time at the chart's left edge


_DIGITS = re.compile(r"(\d+)")


def natural(task_id: str) -> tuple[tuple[int, str | int], ...]:
    """A sort key that puts ``item[2]`` before ``item[10]``."""
    return tuple(
        (1, int(part)) if part.isdigit() else (0, part) for part in _DIGITS.split(task_id) if part
    )


def _step(span: float, ticks: int) -> int:
    for step in _STEPS:
        if span / step <= ticks:
            return step
    return _STEPS[-1] * max(1, int(span / (_STEPS[-1] * ticks)) + 1)


def layout_gantt(
    spans: Sequence[TrySpan], now: float, *, chart_width: float = 800.0
) -> GanttLayout:
    """Rows in the order their first try began (never-tried tasks last, by id)."""
    timed = [s for s in spans if s.queued_at is not None or s.started_at is not None]
    first: dict[str, float] = {}
    for s in timed:
        begin = s.queued_at if s.queued_at is not None else s.started_at
        assert begin is not None
        first[s.task_id] = min(first.get(s.task_id, begin), begin)
    untried = sorted({s.task_id for s in spans} - set(first), key=natural)
    rows = tuple(sorted(first, key=lambda t: (first[t], natural(t)))) + tuple(untried)
    index = {task: i for i, task in enumerate(rows)}
    height = AXIS_HEIGHT + ROW_HEIGHT * len(rows)
    width = LABEL_WIDTH + chart_width
    if not first:
        return GanttLayout(rows, (), (), width, height, None)
    start = min(first.values())
    ends = [s.ended_at if s.ended_at is not None else now for s in timed]
    stop = max(max(ends), start + 1.0)
    scale = chart_width / (stop - start)

    def x(at: float) -> float:
        return round(LABEL_WIDTH + (at - start) * scale, 1)

    bars = []
    for s in sorted(timed, key=lambda s: (index[s.task_id], s.try_number)):
        end = s.ended_at if s.ended_at is not None else now
        bars.append(
            Bar(
                index[s.task_id],
                s.task_id,
                s.try_number,
                s.state,
                None if s.queued_at is None else x(s.queued_at),
                None if s.started_at is None else x(s.started_at),
                x(max(end, s.started_at or s.queued_at or end)),
                s.ended_at is None,
                s.queued_at,
                s.started_at,
                s.ended_at,
            )
        )
    step = _step(stop - start, 8)
    first_tick = start - start % step + (step if start % step else 0)
    ticks = []
    at = float(first_tick)
    while at <= stop:
        ticks.append(Tick(x(at), at))
        at += step
    return GanttLayout(rows, tuple(bars), tuple(ticks), width, height, start)
