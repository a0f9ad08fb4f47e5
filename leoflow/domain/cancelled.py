"""Cancelled is a way to fail, not a state of its own: a cancelled run is ``failed``
with a message that starts "cancelled" (the API's cancel, a backfill's cancel), a
cancelled task instance is ``failed`` for reason ``cancelled``. The store and the
scheduler keep the one state; what users see (the UI, the API's ``cancelled`` flag,
the runs filters) tells the two apart here.
"""

from __future__ import annotations

from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState

CANCELLED = "cancelled"
# What every cancel writes first in a run's message ("cancelled by NAME",
# "cancelled with backfill N by NAME").
RUN_MESSAGE_PREFIX = "cancelled"


def run_cancelled(state: RunState | str, message: str | None) -> bool:
    return str(state) == RunState.FAILED.value and bool(
        message and message.startswith(RUN_MESSAGE_PREFIX)
    )


def task_cancelled(state: TaskState | str, reason: str | None) -> bool:
    return str(state) == TaskState.FAILED.value and reason == EndReason.CANCELLED.value


def shown_run_state(state: RunState, message: str | None) -> str:
    """The run's state as users see it: ``cancelled`` for a cancelled failure."""
    return CANCELLED if run_cancelled(state, message) else state.value


def shown_task_state(state: TaskState, reason: str | None) -> str:
    return CANCELLED if task_cancelled(state, reason) else state.value
