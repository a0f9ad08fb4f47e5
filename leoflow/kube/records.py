"""Slim pod records and what a finished pod says about its try. Pure functions.

The pod cache keeps one :class:`PodRecord` per task pod — the fields the reaper, GC
and terminal recovery read — parsed straight from the watch's JSON, never the whole
object.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leoflow.domain.reasons import EndReason
from leoflow.kube.objects import JsonObj
from leoflow.kube.pod import CONTAINER, LABEL_SHAPE, LABEL_TI, LABEL_TRY

OOM_MESSAGE = (
    "out of memory: the kernel killed this task's process. Raise the task's memory limit "
    "(resources.limits.memory); if it uses an engine with its own memory budget, such as "
    "DuckDB, set that budget too, because it sizes itself from detected RAM and may not see "
    "the container's limit."
)
# Every waiting reason with which kubelet says a container will not start without a
# change from outside (pkg/kubelet/images/types.go, pkg/kubelet/container/sync_result.go).
# Kubelet keeps retrying them, but the try would only wait out pod_pending_timeout: the
# image is missing, unpullable or named wrong; the container's config, create or start
# is refused. "ContainerCreating" and "PodInitializing" are the normal waits, not these.
IMAGE_PULL_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "ImageInspectError",
        "RegistryUnavailable",
        "SignatureValidationFailed",
    }
)
CONFIG_ERROR_REASONS = frozenset(
    {
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreCreateHookError",
        "PreStartHookError",
        "PostStartHookError",
    }
)
_IMAGE_HINTS = {
    "ErrImageNeverPull": (
        " The pod's imagePullPolicy is Never (set by the DAG's settings, an admission "
        "policy or a mutating webhook), so the node never pulls: preload the image on the "
        "nodes or let the policy allow pulls."
    ),
    "InvalidImageName": " The image reference is malformed: check the task's `image`.",
}
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# Exit codes of ``leoflow agent`` itself (leoflow/agent/cli.py), not of the task.
AGENT_EXIT_CODES = {
    3: "the agent could not reach the control plane's agent endpoint",
    4: "the control plane refused the agent's ticket or session",
    5: "the agent could not set the task up (a secret or the working directory)",
    126: "the task's command is not executable",
    127: "the task's command was not found in the image",
}


def _intern(value: object) -> str | None:
    return sys.intern(value) if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What Leoflow keeps of one task pod."""

    name: str
    uid: str
    ti_pk: int | None
    try_number: int | None
    phase: str
    exit_code: int | None = None
    terminated_reason: str | None = None
    terminated_message: str | None = None
    finished_at: str | None = None
    waiting_reason: str | None = None
    waiting_message: str | None = None
    status_reason: str | None = None
    status_message: str | None = None
    scheduling_message: str | None = None
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None
    # A warm pod's shape (its label); None for a pod of one try.
    shape: str | None = None

    @property
    def key(self) -> tuple[int, int] | None:
        if self.ti_pk is None or self.try_number is None:
            return None
        return self.ti_pk, self.try_number

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None


def parse_pod(obj: JsonObj) -> PodRecord:
    """The record of a pod object (raw JSON as the apiserver sends it)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = obj.get("status") or {}
    exit_code = terminated_reason = terminated_message = finished_at = None
    waiting_reason = waiting_message = None
    statuses = status.get("containerStatuses") or ()
    chosen = None
    for cs in statuses:
        if cs.get("name") == CONTAINER:
            chosen = cs
            break
    if chosen is None and statuses:
        chosen = statuses[0]
    if chosen is not None:
        state = chosen.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated:
            exit_code = _int(terminated.get("exitCode"))
            terminated_reason = _intern(terminated.get("reason"))
            terminated_message = terminated.get("message") or None
            finished_at = terminated.get("finishedAt")
        elif waiting:
            waiting_reason = _intern(waiting.get("reason"))
            waiting_message = waiting.get("message") or None
    scheduling_message = None
    phase = status.get("phase") or "Pending"
    if phase == "Pending":
        for cond in status.get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                scheduling_message = cond.get("message") or cond.get("reason")
    return PodRecord(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        ti_pk=_int(labels.get(LABEL_TI)),
        try_number=_int(labels.get(LABEL_TRY)),
        shape=_intern(labels.get(LABEL_SHAPE)),
        phase=sys.intern(phase),
        exit_code=exit_code,
        terminated_reason=terminated_reason,
        terminated_message=terminated_message,
        finished_at=finished_at,
        waiting_reason=waiting_reason,
        waiting_message=waiting_message,
        status_reason=_intern(status.get("reason")),
        status_message=status.get("message") or None,
        scheduling_message=scheduling_message,
        deletion_timestamp=meta.get("deletionTimestamp"),
        creation_timestamp=meta.get("creationTimestamp"),
    )


def parse_time(stamp: str | None) -> float | None:
    """An RFC 3339 timestamp as epoch seconds, or None."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Outcome:
    reason: str
    exit_code: int | None
    message: str


def terminal_outcome(record: PodRecord) -> Outcome:
    """How a try ended, read from its finished pod (the agent did not report)."""
    note = "; its agent did not report, so this comes from the pod's status"
    if record.status_reason == "Evicted":
        return Outcome(
            EndReason.EVICTED, None, f"evicted by the kubelet: {record.status_message or ''}"
        )
    if record.terminated_reason == "OOMKilled":
        return Outcome(EndReason.OOM, record.exit_code, OOM_MESSAGE)
    code = record.exit_code
    if code is None:
        why = record.status_reason or "unknown reason"
        detail = f": {record.status_message}" if record.status_message else ""
        return Outcome(
            EndReason.LOST,
            None,
            f"the pod {record.name} {record.phase.lower()} without a container exit ({why}"
            f"{detail}){note}",
        )
    if code == 0 and record.phase == "Succeeded":
        return Outcome(EndReason.SUCCESS, 0, f"the task's container exited 0{note}")
    what = AGENT_EXIT_CODES.get(code)
    detail = f" ({what})" if what else ""
    extra = f": {record.terminated_message}" if record.terminated_message else ""
    reason = record.terminated_reason or "Error"
    return Outcome(
        EndReason.EXIT_CODE,
        code,
        f"the task's container exited with code {code}{detail} [{reason}]{extra}{note}",
    )


def waiting_outcome(record: PodRecord) -> Outcome | None:
    """A Pending pod that will never start by itself: image pull or config error."""
    reason = record.waiting_reason or ""
    if reason in IMAGE_PULL_REASONS:
        msg = f": {record.waiting_message}" if record.waiting_message else ""
        return Outcome(
            EndReason.IMAGE_PULL,
            None,
            f"the task's image could not be pulled ({reason}{msg}); the pod was deleted."
            f"{_IMAGE_HINTS.get(reason, '')}",
        )
    if reason in CONFIG_ERROR_REASONS:
        text = record.waiting_message or ""
        hint = ""
        if "non-numeric user" in text or "runAsNonRoot" in text:
            hint = (
                " The image's USER is not numeric, so Kubernetes cannot check that it is not "
                "root: make the image's final USER numeric (e.g. USER 65532), or turn off "
                "taskPodSecurity.runAsNonRoot."
            )
        verb = "created" if reason.startswith("Create") else "started"
        return Outcome(
            EndReason.LAUNCH_FAILED,
            None,
            f"the task's container could not be {verb} ({reason}: {text}); the pod was "
            f"deleted.{hint}",
        )
    return None
