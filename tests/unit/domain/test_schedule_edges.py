"""Property: any DAG spec that validates can be scheduled for a simulated century,
anywhere in the span of dates, without an exception escaping; every fire time is in
order, after start_date and inside the span; the spec round-trips as stored. A spec
that does not validate says which field and line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.catalogue import CatalogueEntry, parse_spec
from leoflow.domain.schedule import clamped_utc, due_runs, next_fires
from leoflow.domain.timebounds import EARLIEST_STAMP, LATEST, LATEST_STAMP

ZONES = [
    "UTC",
    "Pacific/Kiritimati",  # +14
    "Etc/GMT+12",  # -12
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a half-hour DST shift
    "Asia/Kathmandu",  # +05:45
    "Pacific/Apia",  # skipped 2011-12-30 entirely
    "America/Santiago",  # DST at midnight: the day starts at 01:00
    "Antarctica/Troll",  # +00 / +02
]
OFFSETS = [
    None,
    UTC,
    timezone(timedelta(hours=14)),
    timezone(-timedelta(hours=12)),
    timezone(timedelta(hours=23, minutes=59)),
    timezone(-timedelta(hours=23, minutes=59)),
    ZoneInfo("Pacific/Kiritimati"),
    ZoneInfo("America/Santiago"),
]
EDGE_DATES = [
    datetime(1, 1, 1),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(1899, 12, 31, 23, 59),
    datetime(1900, 1, 1),
    datetime(1900, 1, 1, tzinfo=timezone(-timedelta(hours=12))),
    datetime(2024, 2, 29),
    datetime(9998, 12, 31, 23, 59),
    datetime(9998, 12, 31, 23, 59, tzinfo=timezone(-timedelta(hours=12))),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
    datetime(9999, 12, 31, 23, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
]


def _field(lo: int, hi: int) -> st.SearchStrategy[str]:
    n = st.integers(lo, hi)
    return st.one_of(
        st.just("*"),
        n.map(str),
        st.tuples(n, n).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.tuples(n, st.integers(1, hi - lo + 1)).map(lambda a: f"{a[0]}/{a[1]}"),
        st.integers(1, hi - lo + 1).map(lambda k: f"*/{k}"),
        st.lists(n, min_size=2, max_size=3).map(lambda v: ",".join(map(str, v))),
    )


CRONS = st.one_of(
    st.sampled_from(["@yearly", "@daily", "@hourly", "0 0 29 2 *", "* * 29 2 *", "0 0 31 12 *"]),
    st.tuples(_field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 7)).map(
        " ".join
    ),
)
STARTS = st.one_of(
    st.sampled_from(EDGE_DATES),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(OFFSETS),
    ),
)
# Where the simulated century begins: the start itself, now, or the span's far end.
ORIGINS = st.sampled_from(["start", "now", "late", "early"])
YEAR = 365.25 * 86400


def _doc(cron: str, zone: str, start: datetime | None, catchup: bool) -> str:
    lines = [f"dag_id: edge\nschedule: '{cron}'\ntimezone: {zone}\ncatchup: {str(catchup).lower()}"]
    if start is not None:
        lines.append(f"start_date: '{start.isoformat()}'")
    lines.append("tasks: {a: {command: 'true'}}\n")
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cron=CRONS,
    zone=st.sampled_from(ZONES),
    start=st.one_of(st.none(), STARTS),
    catchup=st.booleans(),
    origin=ORIGINS,
)
def test_any_spec_that_validates_schedules_for_a_century(
    cron: str, zone: str, start: datetime | None, catchup: bool, origin: str
) -> None:
    try:
        spec = parse_dag(_doc(cron, zone, start, catchup), Path("edge.yaml"))
    except DagFileError as exc:
        for problem in exc.problems:  # refused with the field and line, never a crash
            assert problem.field in {"schedule", "start_date"}, exc
            assert problem.line is not None, exc
        return
    assert parse_spec(CatalogueEntry.of(spec, fileloc="e", source=None).spec_json) == spec
    floor = spec.start_date.timestamp() if spec.start_date is not None else EARLIEST_STAMP
    begin = {
        "start": max(floor, EARLIEST_STAMP),
        "now": datetime(2026, 12, 7, tzinfo=UTC).timestamp(),
        "late": LATEST_STAMP - 50 * YEAR,
        "early": EARLIEST_STAMP,
    }[origin]
    first_seen = begin
    last: float | None = None
    # A century of polls: far apart (an outage), then close together, past the span's end.
    for step in range(16):
        now = begin + step * (100 * YEAR / 12) + (step % 4) * 61
        fires = due_runs(spec, last, now, first_seen, limit=16)
        assert fires == sorted(set(fires))
        assert all(fire <= now and fire >= floor and fire < LATEST_STAMP for fire in fires)
        assert last is None or all(fire > last for fire in fires)
        if fires:
            last = fires[-1]
        cron_of = spec.cron()
        assert cron_of is not None
        upcoming = cron_of.next_after(clamped_utc(last if last is not None else now))
        assert upcoming is None or upcoming < LATEST
        ahead = next_fires(spec, clamped_utc(now), 3)
        assert all(a < b for a, b in pairwise(ahead))


@settings(max_examples=150, deadline=None)
@given(
    cron=CRONS,
    zone=st.sampled_from(ZONES),
    after=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2040, 1, 1)),
    span=st.integers(0, 3 * 86400),
)
def test_the_last_fire_is_the_last_of_a_walk_over_every_fire(
    cron: str, zone: str, after: datetime, span: int
) -> None:
    from itertools import takewhile

    from leoflow.domain.cron import CronError, CronSchedule
    from leoflow.domain.schedule import last_fire

    try:
        schedule = CronSchedule.parse(cron, zone)
    except CronError:
        return
    start = after.replace(tzinfo=UTC)
    now = start + timedelta(seconds=span)

    def walk() -> list[datetime]:
        out, moment = [], start
        while (fire := schedule.next_after(moment)) is not None:
            out.append(fire)
            moment = fire
            if fire > now:
                break
        return out

    fires = list(takewhile(lambda fire: fire <= now, walk()))
    assert last_fire(schedule, start, now) == (fires[-1] if fires else None)
