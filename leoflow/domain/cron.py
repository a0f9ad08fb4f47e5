"""Five-field cron expressions evaluated in a time zone, without third-party code.

Fields follow croniter (what Airflow uses), checked against it by a differential
test: when day-of-month and day-of-week are both restricted (anything but a bare
``*``) a day matches if either does. Daylight saving time, as Airflow treats it:

- a schedule whose hour field covers every hour (``0 * * * *``, ``*/5 * * * *``)
  runs in elapsed time: it fires in both passes of the repeated autumn hour, and
  an hourly job keeps firing once per real hour across the spring jump;
- any other schedule fires once per local wall-clock time: a time that occurs
  twice fires at its first occurrence, and a time the spring jump skips fires at
  the jump itself (``30 2 * * *`` in Berlin runs at 03:00 CEST that night).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from leoflow.domain.timebounds import EARLIEST, LATEST

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


_EVERY_HOUR = frozenset(range(24))


def _first_instant_at(local: datetime, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) at which the local clock reads ``local`` or later.

    For a repeated time that is its first occurrence; for a time a DST jump skips,
    the jump itself.
    """
    first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == local:
        return first
    # Skipped: fold=1 reads the time with the offset after the jump, which lands
    # before it; the jump is the first minute from there whose local time is later.
    instant = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    while instant.astimezone(zone).replace(tzinfo=None) < local:
        instant += timedelta(minutes=1)
    return instant


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
        stepped = "/" in part
        if stepped:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{field}: step {step_text!r} must be a positive number")
            step = int(step_text)
        # In day-of-week, 7 is Sunday only when written; ``*`` and ``N/s`` stop at 6 (croniter).
        top = 6 if field == "day of week" else hi
        if part == "*":
            start, end = lo, top
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = _value(a, lo, hi, names, field), _value(b, lo, hi, names, field)
            if start > end:
                raise CronError(f"{field}: range {part!r} runs backwards")
        else:
            start = _value(part, lo, hi, names, field)
            end = top if stepped else start  # ``N/s`` is ``N-max/s``, even when s is 1
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
            # As croniter (so Airflow), not Vixie cron: only a bare ``*`` leaves a day field
            # unrestricted, so ``*/2`` in day-of-month ORs with a restricted day-of-week.
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

    def next_after(self, moment: datetime, until: datetime | None = None) -> datetime | None:
        """The first fire time strictly after ``moment`` (aware), in UTC; None if none
        (or none at or before ``until``, which bounds the search).

        Only fire times in [EARLIEST, LATEST) exist (``leoflow.domain.timebounds``):
        a search never leaves datetime's range, whatever the moment or the zone.
        """
        end = LATEST if until is None else min(LATEST, until + timedelta(minutes=1))
        if moment >= end:
            return None
        moment = max(moment, EARLIEST - timedelta(microseconds=1))
        fire = (
            self._next_elapsed(moment, end)
            if self.hours == _EVERY_HOUR
            else self._next_wall_clock(moment, end)
        )
        if fire is None or fire >= LATEST or (until is not None and fire > until):
            return None
        return fire

    def _next_elapsed(self, moment: datetime, end: datetime) -> datetime | None:
        # Walk real minutes, reading each on the local clock: both passes of a
        # repeated hour are real time, and a skipped hour is simply not there.
        zone = ZoneInfo(self.timezone)
        now = moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = now + min(timedelta(days=_HORIZON_DAYS), end - now)
        while now < limit:
            local = now.astimezone(zone)
            if local.month not in self.months:  # a month at a time, not a day
                year, month = divmod(local.year * 12 + local.month, 12)
                start = datetime(year, month + 1, 1)
                now = max(now + timedelta(minutes=1), _first_instant_at(start, zone))
                continue
            if not self._day_matches(local):
                midnight = datetime(local.year, local.month, local.day) + timedelta(days=1)
                now = max(now + timedelta(minutes=1), _first_instant_at(midnight, zone))
                continue
            if local.minute not in self.minutes:
                later = [m for m in self.minutes if m > local.minute]
                step = (min(later) if later else 60 + min(self.minutes)) - local.minute
                now += timedelta(minutes=step)
                continue
            return now
        return None

    def _next_wall_clock(self, moment: datetime, end: datetime) -> datetime | None:
        zone = ZoneInfo(self.timezone)
        local = moment.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
        local += timedelta(minutes=1)
        # The end read as a wall clock: LATEST a day early, so no zone's offset passes
        # it; an earlier end a day late, so no offset cuts a fire off before it.
        last = (LATEST - timedelta(days=1)).replace(tzinfo=None)
        if end < LATEST - timedelta(days=2):
            last = min(last, end.astimezone(zone).replace(tzinfo=None) + timedelta(days=1))
        limit = local + min(timedelta(days=_HORIZON_DAYS), last - local)
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
            as_utc = _first_instant_at(local, zone)
            if as_utc <= moment:
                local += timedelta(minutes=1)  # second pass through a repeated hour
                continue
            return as_utc
        return None
