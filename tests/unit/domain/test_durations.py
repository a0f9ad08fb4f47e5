"""Durations as DAG authors write them, and as tables print them."""

from __future__ import annotations

import math

import pytest

from leoflow.domain.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1h30m", 5400.0),
        ("1m30s500ms", 90.5),
        ("1.5h", 5400.0),
        ("0s", 0.0),
        (" 5m ", 300.0),
        ("5 m 3 s", 303.0),
        ("0.25s", 0.25),
    ],
)
def test_parse_strings(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("value", "seconds"), [(0, 0.0), (45, 45.0), (1.5, 1.5)])
def test_parse_numbers_are_seconds(value: float, seconds: float) -> None:
    result = parse_duration(value)
    assert result == seconds
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value",
    ["", "   ", "5", "30", "5x", "m5", "-5s", "5s junk", "5S", "1h-30m", "s", "1..5s", "ms"],
)
def test_parse_rejects_bad_strings(value: str) -> None:
    with pytest.raises(ValueError, match="expected a duration such as 500ms"):
        parse_duration(value)


def test_parse_error_quotes_the_input() -> None:
    with pytest.raises(ValueError, match="got '5x'"):
        parse_duration("5x")


@pytest.mark.parametrize("value", [True, False, None, [], {"s": 1}])
def test_parse_rejects_other_types(value: object) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(value)


def test_parse_rejects_negative_numbers() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        parse_duration(-1)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_parse_rejects_non_finite_numbers(value: float) -> None:
    # YAML's .nan and .inf are floats; neither is a usable timeout or delay.
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0ms"),
        (0.85, "850ms"),
        (1.0, "1.0s"),
        (12.34, "12.3s"),
        (60.0, "1m00s"),
        (245.0, "4m05s"),
        (3599.0, "59m59s"),
        (3600.0, "1h00m"),
        (7260.0, "2h01m"),
        (90000.0, "25h00m"),
    ],
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.9996, "1.0s"), (59.96, "1m00s"), (59.94, "59.9s")],
)
def test_format_rounds_across_unit_boundaries(seconds: float, text: str) -> None:
    # Rounding up must move to the next unit, never print "1000ms" or "60.0s".
    assert format_duration(seconds) == text
