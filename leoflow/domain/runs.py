"""The run-level gate: which queued runs of a DAG may start, under ``max_active_runs``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class QueuedRun(Protocol):
    """Anything with a run age: smaller ``run_order`` is older (e.g. created_at)."""

    @property
    def run_order(self) -> float: ...


R = TypeVar("R", bound=QueuedRun)


def runs_to_start(queued: Sequence[R], running_count: int, max_active_runs: int) -> list[R]:
    """The queued runs of one DAG to start now: oldest first, as many as fit beside the
    ``running_count`` runs already running. Runs of equal age keep their given order.
    Running beyond the limit (it was lowered) starts nothing and stops nothing."""
    room = max_active_runs - running_count
    if room <= 0 or not queued:
        return []
    return sorted(queued, key=lambda run: run.run_order)[:room]
