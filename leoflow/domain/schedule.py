"""Which scheduled runs are due: cron fire times between the last run and now."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice, takewhile

from leoflow.domain.cron import CronSchedule
from leoflow.domain.dag import DagSpec
from leoflow.domain.timebounds import EARLIEST, EARLIEST_STAMP, LATEST_STAMP

MAX_CATCHUP_RUNS = 1000


def due_runs(
    spec: DagSpec,
    last_logical: float | None,
    now: float,
    first_seen: float,
    limit: int = MAX_CATCHUP_RUNS,
) -> list[float]:
    """Logical dates (UNIX seconds) of the runs to create now, oldest first.

    Without ``catchup`` only the latest missed fire time runs — a scheduler
    that was down for a week does not replay the week. With ``catchup`` every
    fire time since ``start_date`` (or the last run) runs, at most ``limit``
    (never more than MAX_CATCHUP_RUNS) per call; the caller asks again later.
    A DAG with no runs yet starts from ``start_date`` when catching up, else
    from when the scheduler first saw it; no fire before ``start_date`` runs.
    """
    cron = spec.cron()
    if cron is None:
        return []
    start = _start(spec)
    floor = None if start is None else start.timestamp() - 1  # a fire at start_date runs
    if last_logical is not None:
        base = last_logical
    elif spec.catchup and floor is not None:
        base = floor
    else:
        base = first_seen
    if floor is not None:
        # Nothing runs before start_date, catching up or not.
        base = max(base, floor)
    if not spec.catchup:
        # Only the latest fire time matters: found in a few probes, never by a walk
        # over every missed fire (a minutely cron after a long outage).
        latest = last_fire(cron, clamped_utc(base), clamped_utc(now))
        return [] if latest is None or latest.timestamp() > now else [latest.timestamp()]
    return _fires(cron, base, now, limit=max(0, min(limit, MAX_CATCHUP_RUNS)))


def last_fire(cron: CronSchedule, after: datetime, now: datetime) -> datetime | None:
    """The last fire time in (``after``, ``now``], None if none.

    Gallops ahead from the first fire, doubling the stride while a fire remains
    before ``now``, then halves the gap to the last one: a few dozen bounded
    probes whatever the number of fires between.
    """
    fire = cron.next_after(after, until=now)
    if fire is None:
        return None
    minute = timedelta(minutes=1)
    stride = minute
    # Invariant once the gallop ends: no fire lies in (fire + gap, now].
    while (ahead := cron.next_after(fire + min(stride, now - fire), until=now)) is not None:
        fire, stride = ahead, stride * 2
    gap = min(stride, now - fire)
    while gap > minute:
        half = gap / 2
        ahead = cron.next_after(fire + half, until=now)
        if ahead is None:
            gap = half
        else:
            gap, fire = fire + gap - ahead, ahead
    while (ahead := cron.next_after(fire, until=now)) is not None:
        fire = ahead  # at most one fire a minute: a step or two
    return fire


def _start(spec: DagSpec) -> datetime | None:
    """``start_date`` as an aware datetime (a naive one is UTC), or None."""
    start = spec.start_date
    if start is None:
        return None
    return start if start.tzinfo is not None else start.replace(tzinfo=UTC)


def _after(cron: CronSchedule, moment: datetime) -> Iterator[datetime]:
    """Fire times strictly after ``moment``, in order, until the schedule runs out."""
    while (fire := cron.next_after(moment)) is not None:
        yield fire
        moment = fire


def _fires(cron: CronSchedule, base: float, now: float, limit: int | None) -> list[float]:
    due = takewhile(lambda fire: fire.timestamp() <= now, _after(cron, clamped_utc(base)))
    return [fire.timestamp() for fire in islice(due, limit)]


def clamped_utc(moment: float) -> datetime:
    """A UNIX time as UTC, read as the nearer end of [EARLIEST, LATEST) when outside."""
    # No fire exists outside [EARLIEST, LATEST): a moment beyond either end reads as
    # that end, so no instant a store or a clock holds leaves datetime's range.
    if moment != moment:  # NaN: nothing is after it
        moment = LATEST_STAMP
    return datetime.fromtimestamp(min(max(moment, EARLIEST_STAMP - 1), LATEST_STAMP), UTC)


def next_fires(spec: DagSpec, after: datetime, count: int) -> list[datetime]:
    """The DAG's next ``count`` fire times strictly after ``after`` (UTC), none before
    ``start_date``; fewer when the schedule runs out, none without a schedule."""
    cron = spec.cron()
    if cron is None:
        return []
    moment = after
    start = _start(spec)
    if start is not None and start > EARLIEST:
        moment = max(moment, start - timedelta(microseconds=1))  # a fire at start_date runs
    return list(islice(_after(cron, moment), max(count, 0)))
