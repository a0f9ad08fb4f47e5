"""Counted nouns for messages people read: "1 task", "2 tasks", never "1 tasks" or "task(s)"."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun in its plural (``many``, else noun + "s") unless 1."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
