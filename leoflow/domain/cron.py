"""Five-field cron expressions evaluated in a time zone, without third-party code.

Day-of-month and day-of-week follow Vixie cron: when both are restricted a day
matches if either does. Local times that a DST jump skips do not fire; a local
time that occurs twice fires once, at its first occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    n: i + 1
    for i, n in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DAYS = {n: i for i, n in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# The most days each month can have: Feb 29 fires in leap years.
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# Feb 29 can be eight years away (2096 -> 2104: 2100 is not a leap year).
_HORIZON_DAYS = 366 * 9


class CronError(ValueError):
    """The expression is not valid cron; the message says which field and why."""


def check_timezone(name: str) -> None:
    """Raise CronError unless ``name`` is a time zone of the IANA database."""
    try:
        ZoneInfo(name)
    except (KeyError, ValueError) as exc:
        raise CronError(f"unknown time zone {name!r}") from exc


def _value(token: str, lo: int, hi: int, names: dict[str, int], field: str) -> int:
    key = token.lower()
    if key in names:
        return names[key]
    if not token.isdigit():
        raise CronError(f"{field}: {token!r} is not a number or name")
    number = int(token)
    if not lo <= number <= hi:
        raise CronError(f"{field}: {number} is outside {lo}-{hi}")
    return number


def _parse_field(text: str, lo: int, hi: int, names: dict[str, int], field: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{field}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if part == "*":
            start, end = lo, hi
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = _value(a, lo, hi, names, field), _value(b, lo, hi, names, field)
            if start > end:
                raise CronError(f"{field}: range {part!r} runs backwards")
        else:
            start = _value(part, lo, hi, names, field)
            end = hi if step > 1 else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression bound to a time zone."""

    expression: str
    timezone: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> CronSchedule:
        text = _ALIASES.get(expression.strip().lower(), expression.strip())
        parts = text.split()
        if len(parts) != 5:
            raise CronError(
                f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
            )
        parsed = [
            _parse_field(part, lo, hi, names, name)
            for part, (name, lo, hi, names) in zip(parts, _FIELDS, strict=True)
        ]
        weekdays = frozenset(d % 7 for d in parsed[4])
        if (
            parts[2] != "*"
            and parts[4] == "*"
            and not any(day <= _MONTH_DAYS[month - 1] for month in parsed[3] for day in parsed[2])
        ):
            # Only day-of-month restricts the day, and no chosen month has that day:
            # a schedule such as 0 0 31 2 * would wait forever without a word.
            raise CronError(
                "day of month: no month in the schedule has day "
                + ", ".join(str(d) for d in sorted(parsed[2]))
                + ", so it would never fire"
            )
        check_timezone(timezone)
        return cls(
            expression=expression,
            timezone=timezone,
            minutes=parsed[0],
            hours=parsed[1],
            days=parsed[2],
            months=parsed[3],
            weekdays=weekdays,
            dom_restricted=parts[2] != "*",
            dow_restricted=parts[4] != "*",
        )

    def _day_matches(self, day: datetime) -> bool:
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        if self.dom_restricted:
            return dom
        if self.dow_restricted:
            return dow
        return True

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after ``moment`` (aware), in UTC; None if none."""
        zone = ZoneInfo(self.timezone)
        local = moment.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
        local += timedelta(minutes=1)
        limit = local + timedelta(days=_HORIZON_DAYS)
        while local < limit:
            if local.month not in self.months:
                year, month = (
                    (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
                )
                local = datetime(year, month, 1)
                continue
            if not self._day_matches(local):
                local = datetime(local.year, local.month, local.day) + timedelta(days=1)
                continue
            if local.hour not in self.hours:
                local = local.replace(minute=0) + timedelta(hours=1)
                continue
            if local.minute not in self.minutes:
                local += timedelta(minutes=1)
                continue
            candidate = local.replace(tzinfo=zone, fold=0)
            as_utc = candidate.astimezone(UTC)
            if as_utc.astimezone(zone).replace(tzinfo=None) != local:
                local += timedelta(minutes=1)  # skipped by a DST jump forward
                continue
            if as_utc <= moment:
                local += timedelta(minutes=1)  # second pass through a repeated hour
                continue
            return as_utc
        return None
