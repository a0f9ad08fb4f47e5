"""Which runs' deadline or run_timeout must be looked at in this tick: a heap of due times.

A run enters the heap when the book takes it in (``Book.adopt``: created, adopted,
reloaded, recovered) or starts it (``Book.set_run_state`` to running), the two
moments its due times can appear or move; the book notes those runs in
``entered``. A tick looks only at the runs whose time has come, so it costs the
same with ten live runs or a thousand, and nothing for DAGs with neither setting.

An entry is a hint, never the decision: ``DeadlineWatch`` checks the run the book
holds now under that pk (a reload makes a new mirror, noted on its own), exactly as
the walk over every run did, and a run still pending after that is noted again.
Entries of a run the book no longer holds are dropped.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from leoflow.domain.states import RunState
from leoflow.scheduler.mirror import RunMirror

LIVE_RUN = (RunState.QUEUED, RunState.RUNNING)


def _due_times(run: RunMirror) -> list[float]:
    spec = run.spec
    if run.state not in LIVE_RUN:
        return []
    due: list[float] = []
    if spec.deadline is not None and run.deadline_missed_at is None:
        origin = run.logical_date if run.logical_date is not None else run.created_at
        due.append(origin + spec.deadline)
    if (
        spec.run_timeout is not None
        and run.state is RunState.RUNNING
        and run.started_at is not None
    ):
        due.append(run.started_at + spec.run_timeout)
    return due


class DeadlineDue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []  # (due, run pk); pks only, no mirrors held

    def note(self, run: RunMirror) -> None:
        """Put the run's pending due times on the heap (none: nothing to watch)."""
        for due in _due_times(run):
            heapq.heappush(self._heap, (due, run.pk))

    def take_due(self, now: float, runs: Mapping[int, RunMirror]) -> list[RunMirror]:
        """The book's runs with a due time at or before ``now``, each once, soonest
        first; their entries leave the heap (``note`` again what stays pending)."""
        heap = self._heap
        taken: dict[int, RunMirror] = {}
        while heap and heap[0][0] <= now:
            _, pk = heapq.heappop(heap)
            run = runs.get(pk)
            if run is not None:
                taken.setdefault(pk, run)
        return list(taken.values())
