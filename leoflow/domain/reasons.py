"""Why a try ended (or why a queued try waits): the codes stored in ``reason``.

A ``StrEnum``, so a member equals and stores as its plain string: rows written
before this enum existed read back unchanged, and the UI's text table keys on
the same strings.
"""

from __future__ import annotations

from enum import StrEnum


class EndReason(StrEnum):
    """How a try, or a task instance that never ran, came to its end."""

    SUCCESS = "success"
    EXIT_CODE = "exit_code"
    TIMEOUT = "timeout"
    OOM = "oom"
    EVICTED = "evicted"
    # Its process, pod or agent went away without reporting, or its scheduler stopped.
    LOST = "lost"
    CANCELLED = "cancelled"
    # Cleared while live (queued or running): stopped, and the task runs again.
    CLEARED = "cleared"
    LAUNCH_FAILED = "launch_failed"
    IMAGE_PULL = "image_pull"
    PENDING_TIMEOUT = "pending_timeout"
    SECRET = "secret"
    # The local pool agent died under the try: not the task's fault, so not counted.
    AGENT_DIED = "agent_died"
    UPSTREAM_FAILED = "upstream_failed"
    SKIPPED = "skipped"
    # The command exited 0 but its $LEOFLOW_OUTPUT was too big or not JSON.
    OUTPUT_INVALID = "output_invalid"
    # A mapped task's list could not be had (no such conf key, not a list, too many items).
    MAP_FAILED = "map_failed"
    # Set success or failed by a user (the UI's or API's mark), not by a try's end.
    MARKED = "marked"


class WaitNote(StrEnum):
    """A queued try's ``reason`` while its executor cannot launch it yet (it keeps its slot)."""

    APISERVER_UNREACHABLE = "apiserver_unreachable"
    # Warm pods (leoflow/kube/warm.py): a pod of the try's shape is starting for it, or
    # the DAG's max_pods are all busy and the try waits for one to ask for work.
    WARM_POD_STARTING = "warm_pod_starting"
    WARM_POD_LIMIT = "warm_pod_limit"
