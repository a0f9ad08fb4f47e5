"""Which scheduled runs are due: first runs, catch-up, outages, time zones."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from leoflow.domain.dag import DagSpec, TaskSpec
from leoflow.domain.schedule import MAX_CATCHUP_RUNS, due_runs

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[arg-type,misc]


def spec(schedule: str | None = "0 3 * * *", **fields: Any) -> DagSpec:
    return DagSpec(
        dag_id="d",
        schedule=schedule,
        tasks={"a": TaskSpec(task_id="a", command="true")},
        **fields,
    )


def test_no_schedule_no_runs() -> None:
    assert due_runs(spec(None), None, ts(2025, 6, 10), ts(2020, 1, 1)) == []
    assert due_runs(spec(None, catchup=True), ts(2025, 1, 1), ts(2025, 6, 10), 0) == []


# --- the first run


def test_first_run_is_the_first_fire_after_first_seen() -> None:
    first_seen = ts(2025, 6, 1, 10)
    assert due_runs(spec(), None, ts(2025, 6, 1, 12), first_seen) == []
    assert due_runs(spec(), None, ts(2025, 6, 2, 2, 59), first_seen) == []
    assert due_runs(spec(), None, ts(2025, 6, 2, 3), first_seen) == [ts(2025, 6, 2, 3)]
    assert due_runs(spec(), None, ts(2025, 6, 2, 9), first_seen) == [ts(2025, 6, 2, 3)]


def test_fire_at_first_seen_itself_does_not_run() -> None:
    first_seen = ts(2025, 6, 1, 3)
    assert due_runs(spec(), None, ts(2025, 6, 1, 12), first_seen) == []


def test_without_catchup_a_past_start_date_is_not_replayed() -> None:
    s = spec(start_date=datetime(2020, 1, 1, tzinfo=UTC))
    assert due_runs(s, None, ts(2025, 6, 1, 12), ts(2025, 6, 1, 11)) == []


def test_start_date_in_the_future_holds_runs_back() -> None:
    start = datetime(2025, 6, 10, tzinfo=UTC)
    first_seen = ts(2025, 6, 1)
    for catchup in (False, True):
        s = spec("* * * * *", start_date=start, catchup=catchup)
        assert due_runs(s, None, ts(2025, 6, 1, 0, 30), first_seen) == [], catchup
        due = due_runs(s, None, ts(2025, 6, 10, 0, 0), first_seen)
        assert due == [ts(2025, 6, 10)], catchup


def test_nothing_due_before_the_last_run() -> None:
    assert due_runs(spec(), ts(2025, 6, 2, 3), ts(2025, 6, 2, 12), 0) == []


def test_next_run_after_the_last() -> None:
    assert due_runs(spec(), ts(2025, 6, 2, 3), ts(2025, 6, 3, 3), 0) == [ts(2025, 6, 3, 3)]


# --- catch-up


def test_catchup_creates_every_missed_fire_in_order_from_start_date() -> None:
    s = spec(catchup=True, start_date=datetime(2025, 6, 1, 3, tzinfo=UTC))
    due = due_runs(s, None, ts(2025, 6, 5, 12), ts(2025, 6, 5, 11))
    assert due == [ts(2025, 6, d, 3) for d in range(1, 6)]


def test_catchup_naive_start_date_is_utc() -> None:
    s = spec(catchup=True, start_date=datetime(2025, 6, 1))
    due = due_runs(s, None, ts(2025, 6, 3, 12), ts(2025, 6, 3, 11))
    assert due == [ts(2025, 6, 1, 3), ts(2025, 6, 2, 3), ts(2025, 6, 3, 3)]


def test_catchup_continues_after_the_last_run() -> None:
    s = spec(catchup=True, start_date=datetime(2025, 1, 1, tzinfo=UTC))
    due = due_runs(s, ts(2025, 6, 3, 3), ts(2025, 6, 6, 4), 0)
    assert due == [ts(2025, 6, 4, 3), ts(2025, 6, 5, 3), ts(2025, 6, 6, 3)]


def test_catchup_without_start_date_starts_at_first_seen() -> None:
    s = spec(catchup=True)
    due = due_runs(s, None, ts(2025, 6, 4, 12), ts(2025, 6, 2, 12))
    assert due == [ts(2025, 6, 3, 3), ts(2025, 6, 4, 3)]


def test_catchup_is_bounded_oldest_first() -> None:
    s = spec("* * * * *", catchup=True, start_date=datetime(2025, 6, 1, tzinfo=UTC))
    due = due_runs(s, None, ts(2025, 6, 3), 0)
    assert len(due) == MAX_CATCHUP_RUNS
    assert due[0] == ts(2025, 6, 1)
    assert due == [ts(2025, 6, 1) + i * MINUTE for i in range(MAX_CATCHUP_RUNS)]
    # The next call picks up where the bound stopped.
    more = due_runs(s, due[-1], ts(2025, 6, 3), 0)
    assert more[0] == due[-1] + MINUTE


# --- outages without catch-up


def test_long_outage_creates_only_the_latest_fire() -> None:
    due = due_runs(spec(), ts(2025, 5, 1, 3), ts(2025, 6, 10, 12), 0)
    assert due == [ts(2025, 6, 10, 3)]


def test_minutely_cron_after_three_day_outage_runs_the_latest_minute() -> None:
    now = ts(2025, 6, 10, 12, 34) + 25
    due = due_runs(spec("* * * * *"), now - 3 * DAY, now, 0)
    assert due == [ts(2025, 6, 10, 12, 34)]


def test_hourly_cron_after_a_year_runs_the_latest_hour() -> None:
    due = due_runs(spec("0 * * * *"), ts(2024, 6, 1), ts(2025, 6, 10, 12, 59), 0)
    assert due == [ts(2025, 6, 10, 12)]


def test_rare_cron_after_long_outage_runs_the_latest_fire() -> None:
    # Fires once a year: the latest is older than a day before now.
    due = due_runs(spec("0 0 1 1 *"), ts(2021, 1, 1), ts(2025, 6, 10), 0)
    assert due == [ts(2025, 1, 1)]


def test_weekly_cron_after_outage() -> None:
    # 2025-06-10 is a Tuesday; the latest Sunday midnight is 2025-06-08.
    due = due_runs(spec("@weekly"), ts(2025, 4, 1), ts(2025, 6, 10, 12), 0)
    assert due == [ts(2025, 6, 8)]


def test_no_catchup_nothing_new_is_nothing() -> None:
    assert (
        due_runs(spec("* * * * *"), ts(2025, 6, 10, 12, 34), ts(2025, 6, 10, 12, 34, 59), 0) == []
    )


# --- time zones


def test_time_zone_of_the_schedule() -> None:
    s = spec("0 3 * * *", timezone="Europe/Berlin")
    # 03:00 in Berlin is 01:00 UTC in summer and 02:00 UTC in winter.
    assert due_runs(s, None, ts(2025, 6, 2, 1, 30), ts(2025, 6, 1, 12)) == [ts(2025, 6, 2, 1)]
    assert due_runs(s, None, ts(2025, 1, 2, 2, 30), ts(2025, 1, 1, 12)) == [ts(2025, 1, 2, 2)]
    assert due_runs(s, None, ts(2025, 1, 2, 1, 30), ts(2025, 1, 1, 12)) == []


def test_catchup_across_spring_forward() -> None:
    s = spec(
        "30 2 * * *",
        timezone="Europe/Berlin",
        catchup=True,
        start_date=datetime(2025, 3, 29, tzinfo=UTC),
    )
    due = due_runs(s, None, ts(2025, 4, 1, 12), 0)
    # 02:30 does not exist on Mar 30: that day's run is at the jump (03:00 CEST), none lost.
    assert due == [
        ts(2025, 3, 29, 1, 30),
        ts(2025, 3, 30, 1, 0),
        ts(2025, 3, 31, 0, 30),
        ts(2025, 4, 1, 0, 30),
    ]


def test_catchup_across_fall_back_runs_the_repeated_time_once() -> None:
    s = spec(
        "30 2 * * *",
        timezone="Europe/Berlin",
        catchup=True,
        start_date=datetime(2025, 10, 25, tzinfo=UTC),
    )
    due = due_runs(s, None, ts(2025, 10, 27, 12), 0)
    assert due == [ts(2025, 10, 25, 0, 30), ts(2025, 10, 26, 0, 30), ts(2025, 10, 27, 1, 30)]


def test_due_runs_are_strictly_increasing_and_after_last() -> None:
    s = spec("*/7 * * * *", catchup=True, timezone="America/New_York")
    last = ts(2025, 11, 2, 4)
    due = due_runs(s, last, ts(2025, 11, 2, 8), 0)
    assert due and due[0] > last
    assert all(a < b for a, b in pairwise(due))


def test_catchup_takes_a_smaller_limit_and_resumes_where_it_stopped() -> None:
    minutely = spec("* * * * *", catchup=True, start_date=datetime(2020, 1, 1, tzinfo=UTC))
    first = due_runs(minutely, None, ts(2025, 1, 1), 0, limit=3)
    assert first == [ts(2020, 1, 1, 0, 0), ts(2020, 1, 1, 0, 1), ts(2020, 1, 1, 0, 2)]
    assert due_runs(minutely, first[-1], ts(2025, 1, 1), 0, limit=2) == [
        ts(2020, 1, 1, 0, 3),
        ts(2020, 1, 1, 0, 4),
    ]
    assert due_runs(minutely, None, ts(2025, 1, 1), 0, limit=0) == []
    assert len(due_runs(minutely, None, ts(2025, 1, 1), 0, limit=10**9)) == MAX_CATCHUP_RUNS


def test_next_fires_start_at_start_date_and_count() -> None:
    from leoflow.domain.schedule import next_fires

    s = spec("0 3 * * *", start_date=datetime(2025, 6, 10, 3, tzinfo=UTC))
    fires = next_fires(s, datetime(2025, 1, 1, tzinfo=UTC), 2)
    assert [f.timestamp() for f in fires] == [ts(2025, 6, 10, 3), ts(2025, 6, 11, 3)]
    later = next_fires(s, datetime(2025, 7, 1, 12, tzinfo=UTC), 1)
    assert [f.timestamp() for f in later] == [ts(2025, 7, 2, 3)]
