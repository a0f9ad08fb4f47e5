"""What the reaper concludes about a try from the pod cache: lost, cancelled, stuck Pending.

Judgements over a try, its cached pod record and the clock (a pass keeps only each
try's absence clock); the executor acts on them (reports the outcome, deletes a stuck
pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from leoflow.kube.records import Outcome, PodRecord
from leoflow.kube.tries import Try, fmt_seconds
from leoflow.settings import Settings

if TYPE_CHECKING:
    from leoflow.kube.podcache import PodCache

# A try judged by one reaper pass: its outcome, and its pod to delete (None: no pod).
Verdict = tuple[Try, Outcome, PodRecord | None]


def reap_verdicts(
    tries: Iterable[Try], cache: PodCache, now: float, settings: Settings, agent_grace: float
) -> Iterator[Verdict]:
    """One pass over the tries in flight, reading only the cache: a verdict per try that
    is lost, cancelled or stuck Pending. Absence clocks start and restart as it goes;
    while the cache is not synced nothing is judged absent."""
    synced = cache.synced
    for tracked in tries:
        if tracked.finishing or not tracked.created:
            continue
        record = cache.get(tracked.name)
        if record is None:
            if not synced:
                tracked.absent_since = None
                continue
            if tracked.absent_since is None:
                tracked.absent_since = now
                continue
            # Only what the cache heard after the absence began counts: a watch
            # that has brought nothing (not even a bookmark) since says nothing.
            absent = min(now, cache.heard_at) - tracked.absent_since
            outcome = absence_outcome(tracked, absent, settings, agent_grace)
            if outcome is not None:
                yield tracked, outcome, None
            continue
        tracked.absent_since = None
        stuck = pending_outcome(record, now - tracked.launched_at, settings)
        if stuck is not None:
            yield tracked, stuck, record


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
