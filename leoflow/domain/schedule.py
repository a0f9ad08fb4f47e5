"""Which scheduled runs are due: cron fire times between the last run and now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from leoflow.domain.cron import CronSchedule
from leoflow.domain.dag import DagSpec

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
    floor = None
    if spec.start_date is not None:
        start = spec.start_date
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        floor = start.timestamp() - 1  # a fire exactly at start_date runs
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
        # Only the latest fire time matters; start close to now so a minutely
        # cron after a long outage does not walk every missed minute.
        recent = max(base, now - 86400)
        first = cron.next_after(datetime.fromtimestamp(recent, UTC))
        origin = recent if first is not None and first.timestamp() <= now else base
        latest = _fires(cron, origin, now, limit=None)
        return latest[-1:]
    return _fires(cron, base, now, limit=max(0, min(limit, MAX_CATCHUP_RUNS)))


def _fires(cron: CronSchedule, base: float, now: float, limit: int | None) -> list[float]:
    fires: list[float] = []
    moment = datetime.fromtimestamp(base, UTC)
    while limit is None or len(fires) < limit:
        fire = cron.next_after(moment)
        if fire is None or fire.timestamp() > now:
            break
        fires.append(fire.timestamp())
        moment = fire
    return fires


def next_fires(spec: DagSpec, after: datetime, count: int) -> list[datetime]:
    """The DAG's next ``count`` fire times strictly after ``after`` (UTC), none before
    ``start_date``; fewer when the schedule runs out, none without a schedule."""
    cron = spec.cron()
    if cron is None:
        return []
    moment = after
    if spec.start_date is not None:
        start = spec.start_date
        start = start if start.tzinfo is not None else start.replace(tzinfo=UTC)
        moment = max(moment, start - timedelta(microseconds=1))  # a fire at start_date runs
    fires: list[datetime] = []
    while len(fires) < count:
        fire = cron.next_after(moment)
        if fire is None:
            break
        fires.append(fire)
        moment = fire
    return fires
