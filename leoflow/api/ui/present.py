"""How the pages say things: state icons, exit reasons in words, URLs, times, who
is looking. Plain functions the templates call; no store access."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from leoflow.api.auth import Principal, Role
from leoflow.domain.durations import format_duration
from leoflow.store.rows import TaskInstanceRow

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
}


def quoted(value: str) -> str:
    return quote(value, safe="")


def dag_url(dag_id: str) -> str:
    return f"/dags/{quoted(dag_id)}"


def run_url(dag_id: str, run_id: str) -> str:
    return f"{dag_url(dag_id)}/runs/{quoted(run_id)}"


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


def exit_words(ti: TaskInstanceRow) -> str:
    if ti.reason is None:
        return ""
    words = EXIT_WORDS.get(ti.reason, ti.reason.replace("_", " "))
    if ti.reason == "exit_code" and ti.exit_code is not None:
        words = f"exited with code {ti.exit_code}"
    return words


def pod_of(ti: TaskInstanceRow) -> str | None:
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
