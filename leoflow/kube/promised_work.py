"""The work a Kubernetes executor's reports have promised and still owes: pod deletes
("...; the pod was deleted") and the container log of a try whose agent could not
report. ``stop`` sends it before the client closes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from leoflow.kube.tries import fmt_seconds

log = logging.getLogger("leoflow.kube.executor")


class PromisedWork:
    """Background tasks the executor started and must see through before it stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, work: Coroutine[Any, Any, object]) -> None:
        task: asyncio.Task[object] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def finish(self, within: float, namespace: str) -> None:
        """Send the deletes promised in reports before the client closes: a ``leoflow
        run`` ends right after such a report, and a delete cancelled then is never
        sent, leaving the pod Pending for good. Bounded by ``within``
        (``kube_stop_timeout``); whatever is still unanswered then is named in the log."""
        pending = set(self._tasks)
        if not pending:
            return
        done, left = await asyncio.wait(pending, timeout=within)
        for task in left:
            task.cancel()
        for task in (*done, *left):
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await task
                except Exception:
                    log.exception("a pod delete failed while the executor stopped")
        if left:
            log.error(
                "%d pod deletes were not answered within kube_stop_timeout %s; "
                "delete them by hand: kubectl -n %s get pods -l app.kubernetes.io/managed-by="
                "leoflow --field-selector=status.phase=Pending",
                len(left),
                fmt_seconds(within),
                namespace,
            )
