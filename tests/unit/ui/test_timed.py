from __future__ import annotations

from leoflow.api.ui.timed import timed


def test_dates_with_an_offset_become_time_elements() -> None:
    out = str(timed("waiting for its retry at 2026-12-07T03:00:00+00:00, then runs"))
    assert out == (
        'waiting for its retry at <time datetime="2026-12-07T03:00:00+00:00" '
        'title="2026-12-07T03:00:00+00:00">2026-12-07T03:00:00+00:00</time>, then runs'
    )


def test_z_fractions_and_a_space_separator_are_read() -> None:
    out = str(timed("from 2026-01-02T03:04:05.123Z to 2026-01-02 04:00:00+02:00"))
    assert '<time datetime="2026-01-02T03:04:05.123Z"' in out
    assert '<time datetime="2026-01-02T04:00:00+02:00"' in out


def test_a_date_without_a_zone_is_left_as_written() -> None:
    assert str(timed("day 2026-01-02 and 2026-01-02T03:04:05")) == (
        "day 2026-01-02 and 2026-01-02T03:04:05"
    )


def test_the_text_around_is_escaped() -> None:
    out = str(timed('<script>x</script> "at" 2026-01-02T03:04:05Z'))
    assert "<script>" not in out
    assert "&lt;script&gt;" in out and "&#34;at&#34;" in out
    assert "<time " in out


def test_none_is_empty() -> None:
    assert str(timed(None)) == ""
