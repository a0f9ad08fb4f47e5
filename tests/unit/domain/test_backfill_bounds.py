"""A backfill range's bounds, read one way by the CLI, the API and the web UI."""

from __future__ import annotations

from datetime import UTC, date, datetime

from leoflow.domain.backfill import range_bound


def test_a_day_is_all_of_it_as_the_end_and_its_start_as_the_start() -> None:
    assert range_bound("2026-03-06", end=True) == datetime(
        2026, 3, 6, 23, 59, 59, 999999, tzinfo=UTC
    )
    assert range_bound("2026-03-06", end=False) == datetime(2026, 3, 6, tzinfo=UTC)
    assert range_bound(date(2026, 3, 6), end=True) == datetime(
        2026, 3, 6, 23, 59, 59, 999999, tzinfo=UTC
    )


def test_an_instant_is_itself_naive_being_utc() -> None:
    assert range_bound("2026-03-06T06:00", end=True) == datetime(2026, 3, 6, 6, tzinfo=UTC)
    assert range_bound("2026-03-06T06:00+01:00", end=True) == datetime(2026, 3, 6, 5, tzinfo=UTC)
    assert range_bound("yesterday", end=True) == "yesterday"  # for the caller to refuse
    assert range_bound("2026-02-30", end=True) == "2026-02-30"
