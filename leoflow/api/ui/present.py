"""How the pages say things: state icons, exit reasons in words, URLs, times, who
is looking. Plain functions the templates call; no store access."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import quote

from leoflow.api.auth import Principal, Role
from leoflow.domain.cancelled import shown_run_state, shown_task_state
from leoflow.domain.dag import DagSpec
from leoflow.domain.durations import format_duration
from leoflow.store.rows import RunRow, TaskInstanceRow

STATE_ICON = {
    "success": "\u2713",
    "failed": "\u2717",
    "running": "\u25b6",
    "queued": "\u2026",
    "scheduled": "\u25f7",
    "up_for_retry": "\u21bb",
    "upstream_failed": "\u2298",
    "skipped": "\u00bb",
    "none": "\u25cb",
    "cancelled": "\u2715",
}

EXIT_WORDS = {
    "success": "succeeded",
    "exit_code": "exited with a non-zero code",
    "timeout": "timed out",
    "oom": "ran out of memory",
    "evicted": "was evicted by the kubelet",
    "lost": "was lost: its process or pod went away without reporting",
    "cancelled": "was cancelled",
    "upstream_failed": "did not run: an upstream task failed",
    "image_pull": "could not start: its image could not be pulled",
    "launch_failed": "could not start: its container could not be created",
    "secret": "failed: a secret it asked for could not be resolved",
    "marked": "was marked by hand",
}


def quoted(value: str) -> str:
    return quote(value, safe="")


def dag_url(dag_id: str) -> str:
    return f"/dags/{quoted(dag_id)}"


def run_url(dag_id: str, run_id: str) -> str:
    return f"{dag_url(dag_id)}/runs/{quoted(run_id)}"


def backfill_url(dag_id: str, pk: int | None = None) -> str:
    base = f"{dag_url(dag_id)}/backfills"
    return base if pk is None else f"{base}/{pk}"


def task_url(dag_id: str, run_id: str, task_id: str, try_number: int | None = None) -> str:
    url = f"{run_url(dag_id, run_id)}/tasks/{quoted(task_id)}"
    return url if try_number is None else f"{url}?try={try_number}"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(start: float | None, end: float | None, now: float) -> str:
    if start is None:
        return ""
    return format_duration(max(0.0, (end if end is not None else now) - start))


def span(seconds: float | None) -> str:
    return "" if seconds is None else format_duration(seconds)


class TryFacts(Protocol):
    """What a try's words are made of: a task instance (its latest try) or a kept try."""

    @property
    def reason(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def executor_ref(self) -> str | None: ...


def exit_words(ti: TryFacts) -> str:
    if ti.reason is None:
        return ""
    words = EXIT_WORDS.get(ti.reason, ti.reason.replace("_", " "))
    if ti.reason == "exit_code" and ti.exit_code is not None:
        words = f"exited with code {ti.exit_code}"
    return words


@dataclass(frozen=True)
class RunDeadline:
    """A run's ``deadline:`` and ``run_timeout:`` from its DAG, and whether it was late."""

    deadline: float | None
    origin: str  # what the deadline counts from, in words
    due_at: float | None
    missed_at: float | None
    run_timeout: float | None

    @property
    def words(self) -> str:
        if self.deadline is None:
            return ""
        return f"{format_duration(self.deadline)} after its {self.origin}"


def deadline_of(run: RunRow, spec: DagSpec | None) -> RunDeadline:
    """As ``scheduler.deadlines`` counts it: from the logical date, else the trigger."""
    deadline = None if spec is None else spec.deadline
    run_timeout = None if spec is None else spec.run_timeout
    dated = run.logical_date is not None
    start = run.logical_date if run.logical_date is not None else run.created_at
    return RunDeadline(
        deadline,
        "logical date" if dated else "trigger",
        None if deadline is None else start + deadline,
        run.deadline_missed_at,
        run_timeout,
    )


def pod_of(ti: TryFacts) -> str | None:
    ref = ti.executor_ref or ""
    if ref.startswith("pod:"):
        return ref[4:].split("@", 1)[0]
    return None


@dataclass
class Viewer:
    principal: Principal
    csrf: str
    auth_enabled: bool

    @property
    def can_operate(self) -> bool:
        return self.principal.role >= Role.OPERATOR

    @property
    def can_admin(self) -> bool:
        return self.principal.role >= Role.ADMIN


def run_state(run: RunRow) -> str:
    """A run's state as shown: cancelled apart from failed."""
    return shown_run_state(run.state, run.message)


def ti_state(ti: TaskInstanceRow) -> str:
    return shown_task_state(ti.state, ti.reason)


def run_date(run: RunRow) -> float:
    """A run's date: its logical date, or when it was made (a manual run has none)."""
    return run.logical_date if run.logical_date is not None else run.created_at


def run_seconds(run: RunRow, now: float) -> float:
    """How long the run took (so far); 0 before it started."""
    if run.started_at is None:
        return 0.0
    return max(0.0, (run.ended_at if run.ended_at is not None else now) - run.started_at)


def short_date(ts: float) -> str:
    """A grid column's date, in UTC: month-day hour:minute."""
    return datetime.fromtimestamp(ts, UTC).strftime("%m-%d %H:%M")
