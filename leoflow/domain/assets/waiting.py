"""What an asset-scheduled DAG waits for, in words: the why-waiting answer for assets."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from leoflow.domain.assets.condition import Condition, waiting_for


def age_text(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h``, ``2 d``: how long ago, to the unit that matters."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def waiting_text(
    condition: Condition,
    fresh: Collection[str],
    last_event_at: Mapping[str, float],
    now: float,
) -> str | None:
    """``waiting for: orders (last event 3 h ago), customers (none yet)``, or None when
    the condition is met (a run is due at the next poll). ``fresh``: the assets with
    an event the DAG has not consumed; ``last_event_at``: each asset's newest event."""
    missing = waiting_for(condition, fresh)
    if not missing:
        return None
    parts = []
    for uri in missing:
        at = last_event_at.get(uri)
        seen = "none yet" if at is None else f"last event {age_text(now - at)} ago"
        parts.append(f"{uri} ({seen})")
    return "waiting for: " + ", ".join(parts)
