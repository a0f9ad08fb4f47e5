"""One DAG's failure stays that DAG's: the boundary around its handling in the loop.

Whatever goes wrong while the scheduler works out a DAG's schedule or creates its
runs (a bug, a spec an older version stored, a number the store refuses) is
caught here, logged once per distinct failure, counted, and shown as that DAG's
import error (``leoflow dags list``, the UI), and the DAG is tried again after a
pause. The scheduler and every other DAG go on. What is not about one DAG passes
through: leadership lost (StaleEpoch), the database gone (StoreUnavailable), a
cancellation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from leoflow.scheduler.instruments import counter
from leoflow.store import Store
from leoflow.store.errors import StaleEpoch, StoreUnavailable

log = logging.getLogger("leoflow.scheduler")

# How long a DAG whose handling failed waits before it is tried again: long enough
# not to spin, short enough that a store hiccup clears itself.
RETRY_AFTER = 60.0
# Not one DAG's fault: the caller's loop must see these.
PASS_THROUGH: tuple[type[BaseException], ...] = (StaleEpoch, StoreUnavailable)

_PREFIX = "the scheduler could not"
DAG_FAULTS = counter(
    "leoflow_scheduler_dag_faults_total",
    "Failures while handling one DAG (its schedule, its runs' creation), by step",
    ["step"],
)


class DagFaults:
    """The DAGs whose handling failed, with what was said; the import errors they got."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._said: dict[str, str] = {}  # dag_id -> the failure last logged and recorded
        # Files whose error an earlier process recorded here: cleared once their DAG
        # passes (None: not read yet, once per process).
        self._earlier: set[str] | None = None

    def failing(self, dag_id: str) -> bool:
        return dag_id in self._said

    async def guard(self, dag_id: str, step: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Run ``work``; False if it failed (recorded as the DAG's error), True if not."""
        try:
            await work()
        except PASS_THROUGH:
            raise
        except Exception as exc:
            await self._failed(dag_id, step, exc)
            return False
        if dag_id in self._said:
            await self._recovered(dag_id)
        elif self._earlier is None or self._earlier:
            await self._clear_earlier(dag_id)
        return True

    async def _clear_earlier(self, dag_id: str) -> None:
        if self._earlier is None:
            errors = await self.store.list_dag_errors()
            self._earlier = {f for f, text in errors if text.startswith(_PREFIX)}
        if self._earlier:
            row = await self.store.get_dag(dag_id)
            if row is not None and row.fileloc in self._earlier:
                self._earlier.discard(row.fileloc)
                await self.store.set_dag_error(row.fileloc, None)

    async def _failed(self, dag_id: str, step: str, exc: Exception) -> None:
        DAG_FAULTS.labels(step=step).inc()
        text = (
            f"{_PREFIX} {step} ({type(exc).__name__}: {exc}); no run of this "
            f"DAG is created until that is fixed (tried again every {RETRY_AFTER:.0f}s); "
            "other DAGs keep running"
        )
        if self._said.get(dag_id) == text:
            return
        self._said[dag_id] = text
        log.error("DAG %s: %s", dag_id, text, exc_info=exc)
        await self._record(dag_id, text)

    async def _recovered(self, dag_id: str) -> None:
        del self._said[dag_id]
        log.info("DAG %s is scheduled again", dag_id)
        await self._record(dag_id, None)

    async def _record(self, dag_id: str, text: str | None) -> None:
        """The DAG's file shows the failure as its import error (cleared when it passes)."""
        try:
            row = await self.store.get_dag(dag_id)
            if row is not None:
                await self.store.set_dag_error(row.fileloc, text)
        except PASS_THROUGH:
            raise
        except Exception:  # the log above already says it; the store is the poll's to judge
            log.exception("DAG %s: could not record its scheduling error", dag_id)
