"""Recovery after a restart: resume what a previous scheduler left.

A try that was queued but never started is queued again with the same try
number. A try that was running when its scheduler stopped is lost: it is
retried without using up one of the task's retries, because the failure was
not the task's. A try the executor still runs (``Executor.adopt``) keeps its
slots and goes on.
"""

from __future__ import annotations

import logging

from leoflow.domain.execution import Attempt, Executor
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler import metrics
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import LIVE, Book
from leoflow.scheduler.config import LOCAL_RUN_TYPE
from leoflow.scheduler.mirror import RunMirror
from leoflow.store import Store

log = logging.getLogger("leoflow.scheduler")


async def recover(store: Store, book: Book, executor: Executor, now: float) -> Batch:
    """Adopt the active runs into the book; the returned batch holds the writes."""
    rows = await store.list_runs(states=[RunState.QUEUED, RunState.RUNNING], limit=100_000)
    mirrors: list[RunMirror] = []
    for row in rows:
        if row.run_type == LOCAL_RUN_TYPE:
            continue  # driven by the `leoflow run` process that created it
        spec = book.dags.get(row.dag_id)
        if spec is None:
            log.warning("run %s of unknown DAG %s left as it is", row.run_id, row.dag_id)
            continue
        tis = await store.list_task_instances(run_pk=row.pk)
        mirrors.append(book.adopt(row, spec, tis))
    attempts = [
        Attempt(
            ti.pk,
            ti.try_number,
            ti.state.value,
            run.dag_id,
            run.run_id,
            ti.task_id,
            ti.executor_ref,
        )
        for run in mirrors
        for ti in run.tasks.values()
        if ti.state in LIVE
    ]
    alive = await executor.adopt(attempts) if attempts else set()
    batch = Batch()
    for mirror in mirrors:
        for ti in mirror.tasks.values():
            if (ti.pk, ti.try_number) in alive:
                book.hold(ti)
                if ti.state is TaskState.RUNNING:
                    ti.heartbeat_at = now
                    metrics.RUNNING.inc()
            elif ti.state is TaskState.SCHEDULED:
                book.offer(ti)
            elif ti.state is TaskState.QUEUED:
                book.move(
                    ti, TaskState.SCHEDULED, batch, try_number=ti.try_number - 1, ready_at=now
                )
                book.offer(ti)
            elif ti.state is TaskState.RUNNING:
                book.move(
                    ti,
                    TaskState.UP_FOR_RETRY,
                    batch,
                    max_tries=ti.max_tries + 1,
                    ended_at=now,
                    next_retry_at=now,
                    reason=EndReason.LOST,
                    message="the scheduler stopped while this try ran; it is retried "
                    "without counting against the task's retries",
                )
    return batch
