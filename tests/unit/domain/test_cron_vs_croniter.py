"""Our cron against croniter, the parser Airflow uses: a differential test over random
expressions and start times, and cases ported from croniter's own test suite.

Deliberate differences, excluded here and listed in the README:
- croniter 7 reads a one-value range ``a-a`` as ``*`` (``59-59 * * * *`` fires every
  minute); we read it as ``a``, as cron does.
- croniter treats a day field that allows every value (``*/1``, ``0-6``) sometimes as
  ``*`` and sometimes not; we treat only a bare ``*`` as unrestricted.
- a wall-clock time repeated at the autumn DST change: croniter fires a daily job
  twice, we fire it once (first occurrence), as Airflow runs one run per local day.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from leoflow.domain.cron import CronError, CronSchedule

_FULL_DOM = frozenset(range(1, 32))
_FULL_DOW = frozenset(range(7))


@st.composite
def field(draw: st.DrawFn, lo: int, hi: int) -> str:
    kind = draw(st.sampled_from(["star", "list", "range", "range_step", "star_step", "start_step"]))
    if kind == "star":
        return "*"
    if kind == "list":
        values = draw(st.lists(st.integers(lo, hi), min_size=1, max_size=4))
        return ",".join(str(v) for v in values)
    if kind in ("range", "range_step"):
        a = draw(st.integers(lo, hi - 1))
        b = draw(st.integers(a + 1, hi))  # a-a is a croniter quirk (see above)
        text = f"{a}-{b}"
        return text if kind == "range" else f"{text}/{draw(st.integers(1, 7))}"
    if kind == "star_step":
        return f"*/{draw(st.integers(1, hi - lo + 1))}"
    start = draw(st.integers(lo, min(hi, 6) if hi == 7 else hi))
    return f"{start}/{draw(st.integers(1, 12))}"


@st.composite
def expressions(draw: st.DrawFn) -> str:
    return " ".join(
        [
            draw(field(0, 59)),
            draw(field(0, 23)),
            draw(field(1, 31)),
            draw(field(1, 12)),
            draw(field(0, 7)),
        ]
    )


def theirs(expression: str, tz: str, start: datetime, count: int) -> list[datetime]:
    it = croniter(expression, start.astimezone(ZoneInfo(tz)))
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]


def ours(expression: str, tz: str, start: datetime, count: int) -> list[datetime]:
    cron = CronSchedule.parse(expression, tz)
    out: list[datetime] = []
    moment = start
    for _ in range(count):
        fire = cron.next_after(moment)
        assert fire is not None
        out.append(fire)
        moment = fire
    return out


def _fires_soon(expression: str) -> bool:
    try:
        cron = CronSchedule.parse(expression)
    except CronError as exc:
        # Days no drawn month has (31 with only April): refused at parse by design.
        if "would never fire" in str(exc):
            return False
        raise
    if cron.dom_restricted and cron.days == _FULL_DOM:
        return False
    if cron.dow_restricted and cron.weekdays == _FULL_DOW:
        return False
    # Feb 30 and the like never fire; both libraries disagree on how to say so.
    return cron.next_after(datetime(2000, 1, 1, tzinfo=UTC)) is not None


starts = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2045, 1, 1)).map(
    lambda d: d.replace(tzinfo=UTC, second=0, microsecond=0)
)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
@settings(max_examples=400, deadline=None)
@given(
    expression=expressions(),
    tz=st.sampled_from(["UTC", "Asia/Tokyo", "Asia/Kolkata"]),
    start=starts,
)
def test_same_fires_as_croniter_without_dst(expression: str, tz: str, start: datetime) -> None:
    assume(_fires_soon(expression))
    assert ours(expression, tz, start, 3) == theirs(expression, tz, start, 3)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
@settings(max_examples=200, deadline=None)
@given(
    minute=field(0, 59),
    tz=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Sydney"]),
    day=st.sampled_from(
        ["2025-03-30", "2025-10-26", "2025-03-09", "2025-11-02", "2025-04-06", "2025-10-05"]
    ),
    offset_minutes=st.integers(-180, 240),
)
def test_every_hour_schedules_match_croniter_across_dst(
    minute: str, tz: str, day: str, offset_minutes: int
) -> None:
    # Around each zone's 2025 DST changes, where an hourly job must fire every real hour.
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(minutes=offset_minutes)
    expression = f"{minute} * * * *"
    assert ours(expression, tz, start, 6) == theirs(expression, tz, start, 6)


def u(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[arg-type,misc]


# Ported from croniter's tests (src/croniter/tests/test_croniter.py): expression,
# start, the next fires croniter's suite expects.
CRONITER_CASES = [
    (
        "*/5 * * * *",
        u(2010, 1, 25, 4, 46),
        [u(2010, 1, 25, 4, 50), u(2010, 1, 25, 4, 55), u(2010, 1, 25, 5, 0)],
    ),
    ("0 0 1 * *", u(2010, 1, 25), [u(2010, 2, 1), u(2010, 3, 1), u(2010, 4, 1)]),
    ("0 0 29 2 *", u(2010, 1, 25), [u(2012, 2, 29), u(2016, 2, 29)]),
    ("0 0 * * sat", u(2010, 1, 25), [u(2010, 1, 30), u(2010, 2, 6)]),
    (
        "0 0 1,15 * wed",
        u(2010, 1, 1),
        [u(2010, 1, 6), u(2010, 1, 13), u(2010, 1, 15), u(2010, 1, 20)],
    ),
    ("0 0 * 1-3 1-5", u(2011, 3, 31), [u(2012, 1, 2), u(2012, 1, 3)]),
    (
        "15-30/5 1 * * *",
        u(2012, 1, 1),
        [
            u(2012, 1, 1, 1, 15),
            u(2012, 1, 1, 1, 20),
            u(2012, 1, 1, 1, 25),
            u(2012, 1, 1, 1, 30),
            u(2012, 1, 2, 1, 15),
        ],
    ),
    ("0 0 31 * *", u(2013, 1, 31), [u(2013, 3, 31), u(2013, 5, 31)]),
]


@pytest.mark.parametrize(("expression", "start", "expected"), CRONITER_CASES)
def test_ported_croniter_cases(expression: str, start: datetime, expected: list[datetime]) -> None:
    assert ours(expression, "UTC", start, len(expected)) == expected
    assert theirs(expression, "UTC", start, len(expected)) == expected
