"""The tries a Kubernetes executor has in flight, and how it words their durations."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

Key = tuple[int, int]  # (task instance pk, try number)

# `leoflow agent` exit codes that mean it could not reach or use the control plane:
# 3 unreachable, 4 ticket or session refused, 5 task setup failed.
AGENT_COULD_NOT_REPORT = frozenset({3, 4, 5})


@dataclass(eq=False)
class Try:
    """A try this executor launched or adopted and has not reported on yet."""

    key: Key
    name: str
    launched_at: float
    grace: int | None = None
    # False until the apiserver acknowledged the create: no absence clock before that.
    created: bool = True
    cancelled: str | None = None
    absent_since: float | None = None
    finishing: bool = False
    timer: asyncio.TimerHandle | None = None
    dag_id: str = ""


class Tries:
    """The tries in flight, by key and by pod name; a newer entry for a key replaces."""

    def __init__(self) -> None:
        self.by_key: dict[Key, Try] = {}
        self.by_name: dict[str, Try] = {}

    def track(self, tracked: Try) -> None:
        previous = self.by_key.get(tracked.key)
        if previous is not None:
            self.untrack(previous)
        self.by_key[tracked.key] = tracked
        self.by_name[tracked.name] = tracked

    def untrack(self, tracked: Try) -> None:
        if self.by_key.get(tracked.key) is tracked:
            del self.by_key[tracked.key]
        if self.by_name.get(tracked.name) is tracked:
            del self.by_name[tracked.name]

    def __len__(self) -> int:
        return len(self.by_key)


def fmt_seconds(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
