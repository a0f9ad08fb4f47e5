"""What the reaper concludes about a try from the pod cache: lost, cancelled, stuck Pending.

Pure judgements over a try, its cached pod record and the clock; the executor acts on
them (reports the outcome, deletes a stuck pod).
"""

from __future__ import annotations

from leoflow.kube.records import Outcome, PodRecord
from leoflow.kube.tries import Try, fmt_seconds
from leoflow.settings import Settings


def absence_outcome(
    tracked: Try, absent: float, settings: Settings, agent_grace: float
) -> Outcome | None:
    """The outcome of a try whose pod has been absent from a synced cache for ``absent``
    seconds, or None while it is not yet judged."""
    if tracked.cancelled is not None and absent >= min(agent_grace, settings.pod_lost_grace):
        return Outcome(
            "cancelled",
            None,
            f"cancelled ({tracked.cancelled}); the pod {tracked.name} was deleted",
        )
    if absent > settings.pod_lost_grace:
        return Outcome(
            "lost",
            None,
            f"the task's pod {tracked.name} disappeared without its agent "
            f"reporting (absent from the synced pod cache for {fmt_seconds(absent)}, "
            f"grace pod_lost_grace {fmt_seconds(settings.pod_lost_grace)}): its node "
            "may have gone, or something else deleted the pod",
        )
    return None


def pending_outcome(record: PodRecord, pending: float, settings: Settings) -> Outcome | None:
    """The outcome of a try whose pod has been Pending for ``pending`` seconds past
    ``pod_pending_timeout`` (its pod is then deleted), or None."""
    if record.phase != "Pending" or record.deleting or pending <= settings.pod_pending_timeout:
        return None
    why = record.waiting_reason or record.scheduling_message or "not scheduled"
    if record.waiting_message:
        why += f": {record.waiting_message}"
    return Outcome(
        "pending_timeout",
        None,
        f"the task's pod stayed Pending for {fmt_seconds(pending)} (limit "
        f"pod_pending_timeout {fmt_seconds(settings.pod_pending_timeout)}): {why}; "
        "the pod was deleted",
    )
