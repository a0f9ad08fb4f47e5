"""Durations as DAG authors write them: ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Return seconds; accept a number of seconds or a string like ``1h30m``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 5m or 2h")
    if isinstance(value, int | float):
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
    return total


def format_duration(seconds: float) -> str:
    """Render seconds compactly for tables: ``850ms``, ``12.3s``, ``4m05s``, ``2h01m``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
