"""Clearing task instances: which tasks a clear takes, and what each is reset to.

One rule for both kinds of clear: a task of a finished run (the API writes it
itself) and a task of a running run (the scheduler applies it, stopping a live
try). Retries follow Airflow's clear: the task gets its retries anew, counted
from the try that was cleared (``max_tries = try_number + retries + 1``), and a
try stopped by a clear is not counted as a failure.

Pure: no I/O, nothing above the domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leoflow.domain.marking import walk
from leoflow.domain.reasons import EndReason


def clear_closure(
    task_id: str, downstream: Mapping[str, Sequence[str]], *, with_downstream: bool
) -> list[str]:
    """``task_id`` and, with ``with_downstream``, every task below it; sorted."""
    return sorted({task_id} | (walk(task_id, downstream) if with_downstream else set()))


def cleared_fields(
    try_number: int, declared_tries: int, message: str, *, stopped: bool = False
) -> dict[str, Any]:
    """The fields of a task instance going back to ``none`` after try ``try_number``.

    ``stopped``: the try was live and the clear ends it (reason ``cleared``, kept
    until the next try starts, so the UI and API show why the try ended)."""
    return {
        # The next try is try_number + 1 and gets the task's retries anew.
        "max_tries": try_number + declared_tries,
        "ready_at": None,
        "queued_at": None,
        "started_at": None,
        "ended_at": None,
        "next_retry_at": None,
        "heartbeat_at": None,
        "exit_code": None,
        "reason": EndReason.CLEARED if stopped else None,
        "message": message,
        "executor_ref": None,
    }
