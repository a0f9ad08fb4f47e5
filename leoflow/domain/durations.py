"""Durations as DAG authors write them: ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(value: object, limit: float | None = None) -> float:
    """Return seconds; accept a number of seconds or a string like ``1h30m``.

    ``limit``: the most seconds allowed (a DAG's durations must fit timers and dates).
    """
    seconds = _seconds(value)
    if limit is not None and seconds > limit:
        raise ValueError(
            f"{_short(value)} is longer than {limit / 86400:,.0f}d ({limit:,.0f}s), the limit"
        )
    return seconds


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _seconds(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 5m or 2h")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite duration, got {value!r}")
        if value < 0:
            raise ValueError("expected a duration >= 0")
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 500ms, 30s, 5m or 2h")
    text = value.strip().replace(" ", "")
    pos = 0
    total = 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"expected a duration such as 500ms, 30s, 5m or 2h, got {value!r}")
    if not math.isfinite(total):  # "9" * 400 + "d" reads as inf
        raise ValueError(f"expected a finite duration, got {_short(value)}")
    return total


def format_duration(seconds: float) -> str:
    """Render seconds compactly for tables: ``850ms``, ``12.3s``, ``4m05s``, ``2h01m``."""
    # Decide the unit on the rounded value, so 59.96 s prints 1m00s, not 60.0s.
    if round(seconds * 1000) < 1000:
        return f"{seconds * 1000:.0f}ms"
    if round(seconds, 1) < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
