"""What time alone changes: retries that come due, tries past their timeout, agents
whose heartbeats stopped — and when the loop must next wake."""

from __future__ import annotations

from leoflow.domain.durations import format_duration
from leoflow.domain.reasons import EndReason
from leoflow.domain.states import TaskState
from leoflow.scheduler.batch import Batch
from leoflow.scheduler.book import Book
from leoflow.scheduler.mirror import TaskMirror
from leoflow.scheduler.transitions import Transitions

# A task may overrun its timeout by this much before the scheduler stops waiting
# for the executor to enforce it and fails the try itself.
TIMEOUT_BACKSTOP = 30.0


class Timers:
    def __init__(
        self,
        book: Book,
        transitions: Transitions,
        *,
        heartbeat_timeout: float,
        uses_agent: bool,
    ) -> None:
        self.book = book
        self.transitions = transitions
        self.heartbeat_timeout = heartbeat_timeout
        self.uses_agent = uses_agent

    def next_deadline(self, now: float, poll_interval: float) -> float:
        deadline = now + poll_interval
        for ti in self.book.timed.values():
            if ti.state is TaskState.UP_FOR_RETRY and ti.next_retry_at is not None:
                deadline = min(deadline, ti.next_retry_at)
        return deadline

    def fire(self, now: float, batch: Batch) -> None:
        for ti in list(self.book.timed.values()):
            if ti.state is TaskState.UP_FOR_RETRY:
                if ti.next_retry_at is None or ti.next_retry_at <= now:
                    self.book.move(ti, TaskState.SCHEDULED, batch, ready_at=now, next_retry_at=None)
                    self.book.offer(ti)
            elif ti.state is TaskState.RUNNING:
                self._check_running(ti, now, batch)

    def _check_running(self, ti: TaskMirror, now: float, batch: Batch) -> None:
        spec = self.book.runs[ti.run_pk].spec.tasks.get(ti.task_id)
        if (
            spec is not None
            and spec.timeout is not None
            and ti.started_at is not None
            and now - ti.started_at > spec.timeout + TIMEOUT_BACKSTOP
        ):
            batch.cancels.append((ti.pk, ti.try_number, "timed out"))
            self.transitions.finish_try(
                ti,
                EndReason.TIMEOUT,
                f"timed out after {format_duration(spec.timeout)}; the executor did not stop "
                f"it, so the scheduler failed the try",
                None,
                now,
                batch,
            )
            return
        if (
            self.uses_agent
            and ti.heartbeat_at is not None
            and now - ti.heartbeat_at > self.heartbeat_timeout
        ):
            batch.cancels.append((ti.pk, ti.try_number, "no heartbeat"))
            self.transitions.finish_try(
                ti,
                EndReason.LOST,
                f"no heartbeat from the task's agent for {format_duration(now - ti.heartbeat_at)} "
                f"(limit {format_duration(self.heartbeat_timeout)}); the agent or its "
                "host is gone",
                None,
                now,
                batch,
            )
