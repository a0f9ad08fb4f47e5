"""Backfill plans and a run's data interval: which cron points a range covers.

A run's logical date is the cron point it stands for (a scheduled run is created
at that point). Its data interval is the time since the cron point before it:
``[previous point, logical date)``, so the run at 2026-01-02 00:00 of a daily DAG
covers January 1st. A backfill over ``--from A --to B`` makes one run per cron
point in ``[A, B]``, each the same run the scheduler would have made then.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from leoflow.domain.cron import CronSchedule
from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_run_select import partial_run_env
from leoflow.domain.states import RunState
from leoflow.domain.timebounds import OutOfRange, check_moment

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def range_bound(value: object, *, end: bool) -> object:
    """A backfill range's bound as the CLI, the API and the web UI all read it: a day
    (``2026-01-31``) is its first instant as ``from`` and its last as ``to``, so
    ``--to DAY`` includes every cron point of that day; an instant is itself; naive is
    UTC. Anything else is returned as it is, for the caller to refuse."""
    if isinstance(value, str) and _DAY.fullmatch(value.strip()):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError:
            return value
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime.combine(value, time.max if end else time.min, UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return value
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# One backfill creates at most this many runs: a minutely cron over a year is a
# typo more often than a plan, and the plan is stored row by row.
MAX_BACKFILL_RUNS = 10_000
# How far back a data interval's start is looked for (a yearly cron's previous
# point is a year away; Feb 29 can be eight).
_LOOKBACK_LIMIT = timedelta(days=366 * 9)


class BackfillError(ValueError):
    """A backfill that cannot be planned; the message says what to change."""


@dataclass(frozen=True, slots=True)
class BackfillPoint:
    logical_date: float
    interval_start: float | None
    interval_end: float


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def previous_point(cron: CronSchedule, moment: datetime) -> datetime | None:
    """The last cron point strictly before ``moment``, None if none in nine years."""
    window = timedelta(hours=1)
    while True:
        start = moment - window
        last = None
        point = cron.next_after(start - timedelta(microseconds=1))
        while point is not None and point < moment:
            last = point
            point = cron.next_after(point)
        if last is not None:
            return last
        if window >= _LOOKBACK_LIMIT:
            return None
        window = min(window * 4, _LOOKBACK_LIMIT)


def data_interval(spec: DagSpec, logical_date: float) -> tuple[float | None, float]:
    """``[start, end)`` of the data a run at ``logical_date`` covers."""
    cron = spec.cron()
    if cron is None:
        return None, logical_date
    before = previous_point(cron, datetime.fromtimestamp(logical_date, UTC))
    return (before.timestamp() if before is not None else None), logical_date


def run_env(spec: DagSpec, logical_date: float | None) -> dict[str, str]:
    """What a task sees of its run's logical date (ISO 8601, UTC); nothing without one.

    And whether a ``batch: wave`` run has every dbt task (``partial_run_env``)."""
    env = partial_run_env(spec)
    if logical_date is None:
        return env
    start, end = data_interval(spec, logical_date)
    env = {
        **env,
        "LEOFLOW_LOGICAL_DATE": _iso(logical_date),
        "LEOFLOW_DATA_INTERVAL_END": _iso(end),
    }
    if start is not None:
        env["LEOFLOW_DATA_INTERVAL_START"] = _iso(start)
    return env


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def plan_backfill(
    spec: DagSpec, start: datetime, end: datetime, now: datetime
) -> list[BackfillPoint]:
    """The cron points in ``[start, end]`` (oldest first), or BackfillError."""
    for flag, moment in (("--from", start), ("--to", end)):
        try:
            check_moment(moment)
        except OutOfRange as exc:
            raise BackfillError(f"{flag}: {exc}") from None
    start, end, now = _utc(start), _utc(end), _utc(now)
    cron = spec.cron()
    if cron is None:
        raise BackfillError(
            f"DAG {spec.dag_id} has no schedule: a backfill needs cron points to run"
        )
    if start > end:
        raise BackfillError(
            f"--from {_iso(start.timestamp())} is after --to {_iso(end.timestamp())}"
        )
    if end > now:
        raise BackfillError(
            f"--to {_iso(end.timestamp())} is in the future; a backfill runs past cron "
            "points only (the scheduler makes the runs to come)"
        )
    stop = end
    points: list[datetime] = []
    point = cron.next_after(start - timedelta(microseconds=1))
    while point is not None and point <= stop:
        points.append(point)
        if len(points) > MAX_BACKFILL_RUNS:
            raise BackfillError(
                f"the range holds more than {MAX_BACKFILL_RUNS} cron points of "
                f"{spec.schedule!r}; split it into smaller backfills"
            )
        point = cron.next_after(point)
    if not points:
        raise BackfillError(
            f"no cron point of {spec.schedule!r} ({spec.timezone}) lies between "
            f"{_iso(start.timestamp())} and {_iso(stop.timestamp())}"
        )
    first_start = previous_point(cron, points[0])
    out: list[BackfillPoint] = []
    before = first_start.timestamp() if first_start is not None else None
    for fire in points:
        out.append(BackfillPoint(fire.timestamp(), before, fire.timestamp()))
        before = fire.timestamp()
    return out


def backfill_run_id(logical_date: float, backfill_pk: int) -> str:
    """One run id per point of one backfill: a second backfill of the same day gets its own."""
    return f"backfill__{_iso(logical_date)}_b{backfill_pk}"


def select_points(
    points: list[BackfillPoint],
    existing: Mapping[float, list[RunState]],
    reprocess_failed: bool,
) -> tuple[list[BackfillPoint], list[BackfillPoint]]:
    """(to run, skipped): a point that already has a run is skipped, unless every run
    it has failed and ``reprocess_failed`` asks for those again."""
    chosen: list[BackfillPoint] = []
    skipped: list[BackfillPoint] = []
    for point in points:
        states = existing.get(point.logical_date)
        rerun = reprocess_failed and states and all(s is RunState.FAILED for s in states)
        (chosen if not states or rerun else skipped).append(point)
    return chosen, skipped
