"""OpenLineage events, sent beside the scheduler loop, never inside it.

As with webhooks (``notifications``), the loop only notes what a committed tick
changed: ``collect`` reads the batch (a few small records per changed try or run,
nothing serialised), ``emit`` appends them to a bounded deque. One background task
drains it in order, so a run's or a try's START leaves before its COMPLETE: it builds
each event (``leoflow.domain.lineage``, with what dbt's manifest says of the datasets:
``lineage_dbt``) and hands it to the configured transport. An HTTP endpoint that
fails is retried ``attempts`` times with backoff; a full queue drops its oldest event.
Every outcome is counted (``leoflow_lineage_events_total``); nothing here ever changes
a task or a run, and a bug here is logged, not raised into the loop.

Which transitions say what (a try that never started still gets its START, so every
OpenLineage run has one START and one end):

- try: running -> START; success -> COMPLETE; failed or up_for_retry -> FAIL, except a
  cancelled run's tries -> ABORT; a live try cleared (-> none) -> ABORT;
- DAG run: running -> START (again when a cleared run restarts); success -> COMPLETE;
  failed -> FAIL, or ABORT when it was cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from leoflow.aio.waits import wait_set
from leoflow.domain.lineage import DatasetFacts, EventType, Subject, run_event
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import RunState, TaskState
from leoflow.scheduler.instruments import counter, gauge
from leoflow.scheduler.lineage_dbt import DbtFacts
from leoflow.secrets import SecretBackend
from leoflow.settings_lineage import LineageSettings

if TYPE_CHECKING:
    import httpx

    from leoflow.domain.dag import DagSpec
    from leoflow.scheduler.mirror import RunMirror, TaskMirror
    from leoflow.store.rows import TaskChange

log = logging.getLogger("leoflow.lineage")

EVENTS = counter(
    "leoflow_lineage_events_total",
    "OpenLineage events by outcome (sent, failed, dropped: the queue was full)",
    ["outcome"],
)
ATTEMPTS = counter("leoflow_lineage_attempts_total", "OpenLineage sends tried, retries included")
QUEUED = gauge("leoflow_lineage_queued", "OpenLineage events waiting to be sent")

STOP_GRACE = 1.5  # stopping waits this long for queued events (Lite stops within 3 s)

_TRY_ENDS: dict[TaskState, EventType] = {
    TaskState.SUCCESS: "COMPLETE",
    TaskState.FAILED: "FAIL",
    TaskState.UP_FOR_RETRY: "FAIL",
}
_LIVE = (TaskState.QUEUED, TaskState.RUNNING)


@dataclass(frozen=True, slots=True)
class Note:
    """One transition to tell, as the loop saw it; made into JSON by the worker."""

    kind: EventType
    subject: Subject
    at: float
    message: str | None = None
    spec: DagSpec | None = None  # dbt facets are read from its manifest


class Lineage:
    def __init__(self, settings: LineageSettings | None = None) -> None:
        self.settings = settings or LineageSettings()
        self.secrets: SecretBackend | None = None
        self._queue: deque[Note] = deque()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._busy = 0
        self._worker: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._dbt = DbtFacts()

    @property
    def enabled(self) -> bool:
        return self.settings.transport != "none"

    @property
    def pending(self) -> int:
        return len(self._queue) + self._busy

    # ------------------------------------------------------------ loop side

    def collect(self, batch: Any, runs: Mapping[int, RunMirror], at: float) -> list[Note]:
        """The transitions of a tick's batch, while its runs are still in ``runs``."""
        if not self.enabled:
            return []
        try:
            return self.collect_tasks(
                zip(batch.changes, batch.touched, strict=True), runs, at
            ) + self.collect_runs(batch.run_changes, at)
        except Exception:  # lineage never stops the loop: a bug here costs events only
            log.exception("OpenLineage events of a tick lost")
            EVENTS.labels(outcome="failed").inc()
            return []

    def collect_tasks(
        self,
        changes: Iterable[tuple[TaskChange, TaskMirror]],
        runs: Mapping[int, RunMirror],
        at: float,
    ) -> list[Note]:
        out: list[Note] = []
        for change, ti in changes:
            if change.expected not in _LIVE:
                continue  # admission (scheduled -> queued) starts nothing yet
            kind = _TRY_ENDS.get(change.new)
            if change.new is TaskState.NONE:
                kind = "ABORT"  # cleared while live
            elif kind == "FAIL" and change.fields.get("reason") == EndReason.CANCELLED:
                kind = "ABORT"
            elif change.new is TaskState.RUNNING:
                kind = "START"
            run = runs.get(ti.run_pk)
            if kind is None or run is None:
                continue
            task = run.spec.tasks.get(ti.task_id)
            reads, writes = (task.consumes, task.produces) if task is not None else ((), ())
            number = change.expected_try or 0
            subject = Subject(
                self.settings.namespace, run.dag_id, run.run_id, ti.task_id, number, reads, writes
            )
            stamp = change.fields.get("ended_at") or change.fields.get("started_at")
            when = stamp if isinstance(stamp, float | int) else at
            if change.expected is TaskState.QUEUED and kind != "START":
                out.append(Note("START", subject, when))  # it never reported running
            message = change.fields.get("message")
            dbt = run.spec if run.spec.dbt is not None else None
            out.append(Note(kind, subject, when, None if message is None else str(message), dbt))
        return out

    def collect_runs(
        self, changes: Iterable[tuple[RunMirror, RunState, RunState, dict[str, Any]]], at: float
    ) -> list[Note]:
        out: list[Note] = []
        for run, old, new, fields in changes:
            subject = Subject(self.settings.namespace, run.dag_id, run.run_id)
            message = fields.get("message")
            if new is RunState.RUNNING:
                out.append(Note("START", subject, at))
                continue
            if new is RunState.SUCCESS:
                kind: EventType = "COMPLETE"
            elif new is RunState.FAILED:
                cancelled = str(message or "").startswith("cancelled")
                kind = "ABORT" if cancelled else "FAIL"
            else:
                continue
            if old is RunState.QUEUED:
                out.append(Note("START", subject, at))
            out.append(Note(kind, subject, at, None if message is None else str(message)))
        return out

    def ended_elsewhere(self, batch: Any, run: RunMirror, state: RunState, at: float) -> None:
        """Another process ended ``run`` (an API cancel or mark): its live tries were
        stopped in ``batch``. A run failed so is ABORTed; one marked success COMPLETEs."""
        if not self.enabled:
            return
        kind: EventType = "COMPLETE" if state is RunState.SUCCESS else "ABORT"
        subject = Subject(self.settings.namespace, run.dag_id, run.run_id)
        tick = SimpleNamespace(changes=batch.changes, touched=batch.touched, run_changes=[])
        self.emit([*self.collect(tick, {run.pk: run}, at), Note(kind, subject, at)])

    def emit(self, notes: list[Note]) -> None:
        """Queue events; never waits (the loop calls this). A full queue drops its oldest."""
        if not notes:
            return
        self._ensure_started()
        limit = self.settings.queue_size
        for note in notes:
            if len(self._queue) >= limit:
                self._queue.popleft()
                EVENTS.labels(outcome="dropped").inc()
            self._queue.append(note)
        QUEUED.set(len(self._queue))
        self._idle.clear()
        self._ready.set()

    # ------------------------------------------------------------ worker

    def _ensure_started(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name="leoflow-lineage")

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Give queued events up to ``grace`` seconds, then drop the rest."""
        if self._worker is not None and self.pending:
            await wait_set(self._idle, grace)
        if self.pending:
            log.warning("stopping: %d OpenLineage event(s) not sent", self.pending)
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._queue.clear()

    async def _work(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                self._ready.clear()
                await self._ready.wait()
                continue
            note = self._queue.popleft()
            QUEUED.set(len(self._queue))
            self._busy = 1
            try:
                event = await self._event(note)
                outcome = await self._send(event)
            except Exception:  # a bug here must not end the worker
                log.exception("OpenLineage event %s of %s failed", note.kind, note.subject.job)
                outcome = "failed"
            finally:
                self._busy = 0
            EVENTS.labels(outcome=outcome).inc()

    async def _event(self, note: Note) -> dict[str, Any]:
        facts: dict[str, DatasetFacts] = {}
        sql = None
        if note.spec is not None and note.subject.task_id is not None:
            facts, sql = await self._dbt.read(note.spec, note.subject, note.kind == "COMPLETE")
        return run_event(
            note.kind, note.subject, note.at, message=note.message, sql=sql, facts=facts
        )

    async def _send(self, event: dict[str, Any]) -> str:
        text = json.dumps(event, separators=(",", ":"))
        transport = self.settings.transport
        if transport == "console":
            log.info("%s", text)
            return "sent"
        if transport == "file":
            assert self.settings.file is not None
            await asyncio.to_thread(_append, str(self.settings.file), text)
            return "sent"
        return await self._post(text)

    async def _post(self, text: str) -> str:
        import httpx  # here: a scheduler without lineage never loads it for this

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.settings.timeout)
        url = f"{str(self.settings.url).rstrip('/')}/{self.settings.endpoint.lstrip('/')}"
        headers = {"content-type": "application/json"}
        if (key := await self._api_key()) is not None:
            headers["authorization"] = f"Bearer {key}"
        delay, why = self.settings.backoff, ""
        for attempt in range(1, self.settings.attempts + 1):
            ATTEMPTS.inc()
            try:
                response = await self._client.post(url, content=text, headers=headers)
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            else:
                if response.status_code < 300:
                    return "sent"
                why = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # refused: sending it again will not help
            if attempt < self.settings.attempts:
                await asyncio.sleep(delay)
                delay *= 2
        log.warning("OpenLineage event not sent to %s: %s", url, why)
        return "failed"

    async def _api_key(self) -> str | None:
        if self.settings.api_key_env:
            return os.environ.get(self.settings.api_key_env) or None
        if self.settings.api_key_secret and self.secrets is not None:
            value = await self.secrets.get(self.settings.api_key_secret)
            return value.strip() if value else None
        return None


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
