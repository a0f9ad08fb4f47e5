"""What one tick decided: the writes to commit together and what to do once they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leoflow.domain.execution import Launch
from leoflow.domain.states import RunState
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store.asset_events import TaskAssetEvent
from leoflow.store.rows import TaskChange


@dataclass
class Batch:
    """Filled by the tick's steps; ``leoflow.scheduler.commit`` writes it in one
    fenced transaction, then the loop launches and cancels what it lists."""

    changes: list[TaskChange] = field(default_factory=list)
    # The mirror each change is about, index for index (notifications read it).
    touched: list[TaskMirror] = field(default_factory=list)
    run_changes: list[tuple[RunMirror, RunState, RunState, dict[str, Any]]] = field(
        default_factory=list
    )
    launches: list[Launch] = field(default_factory=list)
    cancels: list[tuple[int, int, str]] = field(default_factory=list)
    tickets: list[tuple[str, int, int]] = field(default_factory=list)
    finished_runs: list[RunMirror] = field(default_factory=list)
    notes: list[tuple[int, int, str | None, str | None]] = field(default_factory=list)
    # Recorded with the successes they belong to, in the same transaction.
    asset_events: list[TaskAssetEvent] = field(default_factory=list)
