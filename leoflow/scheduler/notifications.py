"""Webhook notifications, delivered beside the scheduler loop, never inside it.

The loop only collects what its tick changed (``collect``, before the batch is
written, while every run is still in the mirror) and, once the batch is
committed, queues it (``emit``: a put on an in-memory queue, nothing awaited).
A few delivery workers read the queue: they look the webhook's URL up in the
secrets backend, POST with a timeout, and retry a 5xx, a 429 or a connection
error with backoff. Each delivery is logged and counted; a notifier that fails
changes nothing about the task or the run. The queue is bounded: when webhooks
are slower than events for long, the newest are dropped (counted, logged).
Deliveries still queued when the scheduler stops get a short grace, then are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leoflow.aio.waits import wait_set
from leoflow.domain.notify import Notification, NotifyEvent, NotifyRule, payload, rules_for
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.instruments import counter
from leoflow.secrets import SecretBackend

if TYPE_CHECKING:
    import httpx

    from leoflow.scheduler.mirror import RunMirror, TaskMirror
    from leoflow.store.rows import TaskChange

log = logging.getLogger("leoflow.scheduler.notify")

DELIVERIES = counter(
    "leoflow_notifications_total",
    "Notification deliveries by event and outcome (delivered, failed, dropped)",
    ["event", "outcome"],
)
ATTEMPTS = counter("leoflow_notification_attempts_total", "Webhook requests sent, retries included")

# Stopping waits this long for queued deliveries (Lite must stop within 3 s).
STOP_GRACE = 1.5

_TASK_EVENTS: dict[TaskState, NotifyEvent] = {
    TaskState.FAILED: "failure",
    TaskState.UP_FOR_RETRY: "retry",
    TaskState.SUCCESS: "success",
}
_RUN_EVENTS: dict[RunState, NotifyEvent] = {RunState.FAILED: "failure", RunState.SUCCESS: "success"}


@dataclass(frozen=True)
class NotifyConfig:
    timeout: float = 10.0
    attempts: int = 4
    backoff: float = 1.0  # doubled after each failed attempt
    workers: int = 4
    queue_size: int = 10_000


Delivery = tuple[NotifyRule, Notification]


class Notifications:
    def __init__(self, secrets: SecretBackend | None = None, config: NotifyConfig = NotifyConfig()):
        self.secrets = secrets
        self.config = config
        self._queue: asyncio.Queue[Delivery] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None
        self._busy = 0
        self._idle = asyncio.Event()  # set while nothing is queued or in flight
        self._idle.set()

    # ------------------------------------------------------------ loop side

    def collect(self, batch: Any, runs: Mapping[int, RunMirror], at: float) -> list[Delivery]:
        """What a tick's batch (``changes`` with their ``touched`` mirrors, and
        ``run_changes``) has to say, while its runs are still in ``runs``."""
        return self.collect_tasks(
            zip(batch.changes, batch.touched, strict=True), runs, at
        ) + self.collect_runs(batch.run_changes, at)

    def collect_tasks(
        self,
        changes: Iterable[tuple[TaskChange, TaskMirror]],
        runs: Mapping[int, RunMirror],
        at: float,
    ) -> list[Delivery]:
        out: list[Delivery] = []
        for change, ti in changes:
            event = _TASK_EVENTS.get(change.new)
            run = runs.get(ti.run_pk)
            if event is None or run is None:
                continue
            task = run.spec.tasks.get(ti.task_id)
            rules = rules_for(task.notify, event) if task is not None else []
            if rules:
                # The change's own try and message: later moves in the same tick (a
                # retry admitted at once) have changed the mirror since.
                message = change.fields.get("message", ti.message)
                message = None if message is None else str(message)
                note = Notification(event, run.dag_id, run.run_id, ti.task_id, change.expected_try,
                                    change.new.value, message, at)  # fmt: skip
                out.extend((rule, note) for rule in rules)
        return out

    def collect_run(
        self, run: RunMirror, event: NotifyEvent, state: str, message: str | None, at: float
    ) -> list[Delivery]:
        note = Notification(event, run.dag_id, run.run_id, None, None, state, message, at)
        return [(rule, note) for rule in rules_for(run.spec.notify, event)]

    def collect_runs(
        self, changes: Iterable[tuple[RunMirror, RunState, RunState, dict[str, Any]]], at: float
    ) -> list[Delivery]:
        out: list[Delivery] = []
        for run, _, new, fields in changes:
            event = _RUN_EVENTS.get(new)
            if event is not None:
                out.extend(self.collect_run(run, event, new.value, fields.get("message"), at))
        return out

    def emit(self, deliveries: list[Delivery]) -> None:
        """Queue deliveries; never waits (the loop calls this)."""
        if not deliveries:
            return
        queue = self._ensure_started()
        self._idle.clear()
        for rule, note in deliveries:
            try:
                queue.put_nowait((rule, note))
            except asyncio.QueueFull:
                DELIVERIES.labels(event=note.event, outcome="dropped").inc()
                log.warning("notification queue full: dropped %s %s", note.event, note.subject)
        if self.pending == 0:
            self._idle.set()

    @property
    def pending(self) -> int:
        """Deliveries queued or in flight."""
        return (self._queue.qsize() if self._queue is not None else 0) + self._busy

    # ------------------------------------------------------------ workers

    def _ensure_started(self) -> asyncio.Queue[Delivery]:
        if self._queue is None:
            import httpx  # here: a run without notifications (leoflow run) never pays for it

            self._queue = asyncio.Queue(self.config.queue_size)
            self._client = httpx.AsyncClient(timeout=self.config.timeout)
            self._workers = [
                asyncio.create_task(self._work(), name=f"leoflow-notify-{n}")
                for n in range(self.config.workers)
            ]
        return self._queue

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Give queued deliveries up to ``grace`` seconds (``leoflow run`` ends right
        after its run's last event), then drop the rest."""
        if self._workers and self.pending:
            await wait_set(self._idle, grace)
        if self.pending:
            log.warning("stopping: %d notification(s) not delivered", self.pending)
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        self._workers = []
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._queue = None

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            rule, note = await self._queue.get()
            self._busy += 1
            try:
                outcome = await self._deliver(rule, note)
            except Exception:  # a bug here must not end the worker
                log.exception("delivering %s of %s failed", note.event, note.subject)
                outcome = "failed"
            finally:
                self._busy -= 1
                if self.pending == 0:
                    self._idle.set()
            DELIVERIES.labels(event=note.event, outcome=outcome).inc()

    async def _deliver(self, rule: NotifyRule, note: Notification) -> str:
        url = await self.secrets.get(rule.webhook_secret) if self.secrets is not None else None
        if not url:
            log.error("notification %s of %s not sent: webhook secret %r does not exist",
                      note.event, note.subject, rule.webhook_secret)  # fmt: skip
            return "failed"
        url = url.strip()
        body = payload(rule.format, note)
        delay = self.config.backoff
        why = ""
        import httpx  # loaded already by _ensure_started

        for attempt in range(1, self.config.attempts + 1):
            ATTEMPTS.inc()
            assert self._client is not None
            try:
                response = await self._client.post(url, json=body)
            except httpx.HTTPError as exc:
                why = type(exc).__name__  # its text may carry the URL, a secret
            else:
                if response.status_code < 300:
                    log.info("notified %s of %s (secret %s, try %d)", note.event, note.subject,
                             rule.webhook_secret, attempt)  # fmt: skip
                    return "delivered"
                why = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the webhook refuses this request: sending it again will not help
            if attempt < self.config.attempts:
                await asyncio.sleep(delay)
                delay *= 2
        log.warning("notification %s of %s not delivered (secret %s): %s", note.event,
                    note.subject, rule.webhook_secret, why)  # fmt: skip
        return "failed"
