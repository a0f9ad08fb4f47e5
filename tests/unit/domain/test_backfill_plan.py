"""Backfill plans: the cron points of a range, their data intervals, refusals."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.backfill import (
    MAX_BACKFILL_RUNS,
    BackfillError,
    BackfillPoint,
    data_interval,
    plan_backfill,
    previous_point,
    run_env,
    select_points,
)
from leoflow.domain.states import RunState

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def spec(schedule: str | None, timezone: str = "UTC") -> object:
    lines = ["dag_id: d", f"timezone: {timezone}"]
    if schedule is not None:
        lines.append(f'schedule: "{schedule}"')
    lines += ["tasks:", "  t:", "    command: echo"]
    return parse_dag("\n".join(lines) + "\n", Path("d.yaml"))


def day(n: int) -> datetime:
    return datetime(2026, 1, n, tzinfo=UTC)


def test_a_daily_dag_over_january_has_31_points_each_covering_the_day_before() -> None:
    points = plan_backfill(spec("@daily"), day(1), day(31), NOW)  # type: ignore[arg-type]
    assert [p.logical_date for p in points] == [day(n).timestamp() for n in range(1, 32)]
    assert points[0].interval_start == datetime(2025, 12, 31, tzinfo=UTC).timestamp()
    for before, after in itertools.pairwise(points):
        assert after.interval_start == before.logical_date
        assert after.interval_end == after.logical_date


def test_naive_bounds_are_utc_and_to_is_included() -> None:
    points = plan_backfill(
        spec("0 6 * * *"),  # type: ignore[arg-type]
        datetime(2026, 1, 1),
        datetime(2026, 1, 3, 6, 0),
        NOW,
    )
    assert [datetime.fromtimestamp(p.logical_date, UTC).day for p in points] == [1, 2, 3]


@pytest.mark.parametrize(
    ("schedule", "start", "end", "words"),
    [
        ("0 0 1 * *", day(2), day(20), "no cron point"),
        ("@daily", day(5), day(2), "is after --to"),
        ("@daily", day(1), NOW + timedelta(days=1), "in the future"),
        (None, day(1), day(2), "has no schedule"),
    ],
)
def test_refusals_say_what_is_wrong(
    schedule: str | None, start: datetime, end: datetime, words: str
) -> None:
    with pytest.raises(BackfillError, match=words):
        plan_backfill(spec(schedule), start, end, NOW)  # type: ignore[arg-type]


def test_too_many_points_is_refused() -> None:
    with pytest.raises(BackfillError, match=str(MAX_BACKFILL_RUNS)):
        plan_backfill(spec("* * * * *"), day(1), day(31), NOW)  # type: ignore[arg-type]


def test_run_env_names_the_logical_date_and_interval() -> None:
    env = run_env(spec("@daily"), day(2).timestamp())  # type: ignore[arg-type]
    assert env == {
        "LEOFLOW_LOGICAL_DATE": "2026-01-02T00:00:00+00:00",
        "LEOFLOW_DATA_INTERVAL_START": "2026-01-01T00:00:00+00:00",
        "LEOFLOW_DATA_INTERVAL_END": "2026-01-02T00:00:00+00:00",
    }
    assert run_env(spec("@daily"), None) == {}  # type: ignore[arg-type]


def test_a_yearly_interval_reaches_a_year_back() -> None:
    start, end = data_interval(spec("@yearly"), datetime(2026, 1, 1, tzinfo=UTC).timestamp())  # type: ignore[arg-type]
    assert start == datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    assert end == datetime(2026, 1, 1, tzinfo=UTC).timestamp()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["*/7 * * * *", "0 */5 * * *", "30 2 * * 1-5", "0 0 */3 * *", "15 4 1 * *"]),
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)),
)
def test_previous_point_is_the_point_the_next_one_follows(schedule: str, moment: datetime) -> None:
    cron = spec(schedule, "Europe/Berlin").cron()  # type: ignore[attr-defined]
    moment = moment.replace(tzinfo=UTC)
    before = previous_point(cron, moment)
    assert before is not None and before < moment
    following = cron.next_after(before)
    assert following is not None and following >= moment


def test_existing_runs_are_skipped_unless_failed_and_reprocessed() -> None:
    points = [BackfillPoint(float(n), float(n - 1), float(n)) for n in (1, 2, 3, 4)]
    existing = {
        2.0: [RunState.SUCCESS],
        3.0: [RunState.FAILED],
        4.0: [RunState.FAILED, RunState.RUNNING],
    }
    chosen, skipped = select_points(points, existing, reprocess_failed=False)
    assert [p.logical_date for p in chosen] == [1.0]
    assert [p.logical_date for p in skipped] == [2.0, 3.0, 4.0]
    chosen, _ = select_points(points, existing, reprocess_failed=True)
    assert [p.logical_date for p in chosen] == [1.0, 3.0]
