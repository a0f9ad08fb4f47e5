"""The span of time Leoflow schedules in, and the numbers a DAG may hold.

Python's datetime stops at years 1 and 9999, and everything a schedule computes
from a date (a time zone's offset, the nine-year search for Feb 29, the data
interval's look back) lands a few years either side of it. Dates a DAG or a
request gives are kept within [EARLIEST, LATEST), which leaves that margin on
both ends; a fire time at or after LATEST does not exist (the schedule has no
next fire). Pure.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
EARLIEST_STAMP = EARLIEST.timestamp()
LATEST_STAMP = LATEST.timestamp()

# The store's integer columns (priority, pool_slots, max_tries, slots) are INTEGER:
# 32 bits in PostgreSQL. Every count a DAG sets stays inside them.
INT32_MAX = 2**31 - 1
# A duration (retry_delay, timeout, deadline, run_timeout): ten years is longer than
# any of them means and far inside what timedelta, timers and the store carry.
MAX_DURATION_SECONDS = 10 * 366 * 86400.0


class OutOfRange(ValueError):
    """A date outside [EARLIEST, LATEST); the message says the span."""


def span_text() -> str:
    return f"from {EARLIEST:%Y-%m-%d} up to {LATEST:%Y-%m-%d} (UTC)"


def check_moment(moment: datetime) -> datetime:
    """``moment`` as an aware datetime (naive is UTC), or OutOfRange.

    The UTC reading is computed without leaving datetime's range: a time at
    9999-12-31 with a negative offset is after year 9999 in UTC.
    """
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    try:
        utc = aware.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise OutOfRange(f"{_show(moment)} is outside the dates Leoflow handles: {span_text()}")
    return aware


def check_stamp(stamp: float) -> float:
    """A UNIX time inside [EARLIEST, LATEST), or OutOfRange."""
    if not (math.isfinite(stamp) and EARLIEST_STAMP <= stamp < LATEST_STAMP):
        raise OutOfRange(f"{stamp!r} is outside the dates Leoflow handles: {span_text()}")
    return stamp


def from_stamp(stamp: float) -> datetime:
    """A UNIX time as an aware UTC datetime, or OutOfRange (never Overflow/ValueError)."""
    return datetime.fromtimestamp(check_stamp(stamp), UTC)


def _show(moment: datetime) -> str:
    try:
        return moment.isoformat()
    except (OverflowError, ValueError):  # pragma: no cover - isoformat does not overflow
        return repr(moment)
