"""KubernetesExecutor: one pod per try, everything it knows read from ONE pod cache.

- launch: create the pod (a 409 means this try was launched already: never a second
  pod, the name is deterministic per (task instance, try));
- cancel: delete the pod with the task's grace period;
- terminal recovery: a pod that ended gets its outcome from the cached status
  (exit code, OOMKilled, evicted), reported a short grace after it ended so the
  agent's own, richer Complete usually lands first (the scheduler ignores a
  TaskFinished for a try that is already terminal);
- a Pending pod that cannot start (image pull, container config error) or stays
  Pending past ``pod_pending_timeout`` is reported and deleted;
- liveness: a launched try whose pod is absent from a *synced* cache for longer than
  ``pod_lost_grace`` is lost; while the cache is not synced nothing is judged lost
  and absence clocks restart; a try's clock starts only once its create was
  acknowledged (a create that waits out an outage has no pod to miss yet);
- apiserver outages: a create, delete or GC call that gets no useful answer
  (refused, reset, timeout, 429, 5xx) is tried again with capped exponential
  backoff and jitter, through the token bucket, for ``kube_outage_window``; only an
  answer that the pod is invalid or forbidden fails a launch at once.
- GC: a terminal pod is deleted once ``pod_gc_age`` old, scheduled when it turns
  terminal, each pod deleted once.

apiserver cost is O(1) in running tasks: one watch, plus creates and deletes.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from leoflow.domain.execution import (
    Attempt,
    Launch,
    LaunchError,
    LaunchWaiting,
    LogData,
    Report,
    TaskFinished,
)
from leoflow.domain.reasons import EndReason, WaitNote
from leoflow.kube.client import KubeClient
from leoflow.kube.errors import AlreadyExists, KubeError
from leoflow.kube.metrics import APISERVER_UNREACHABLE, CALL_RETRIES, LAUNCHES_WAITING
from leoflow.kube.pod import PodBuildError, build_pod, pod_name
from leoflow.kube.podcache import Backoff, PodCache
from leoflow.kube.records import (
    Outcome,
    PodRecord,
    parse_time,
    terminal_outcome,
    waiting_outcome,
)
from leoflow.settings import Settings

log = logging.getLogger("leoflow.kube.executor")

Key = tuple[int, int]
# GC tries a pod again every GC_RETRY seconds until the apiserver answers.
GC_RETRY = 30.0
# The first retry of a create or delete waits about this long; later ones double,
# up to ``kube_retry_cap``.
RETRY_BASE = 0.2


# `leoflow agent` exit codes that mean it could not reach or use the control plane:
# 3 unreachable, 4 ticket or session refused, 5 task setup failed.
AGENT_COULD_NOT_REPORT = frozenset({3, 4, 5})


@dataclass(eq=False)
class _Try:
    """A try this executor launched or adopted and has not reported on yet."""

    key: Key
    name: str
    launched_at: float
    grace: int | None = None
    # False until the apiserver acknowledged the create: no absence clock before that.
    created: bool = True
    cancelled: str | None = None
    absent_since: float | None = None
    finishing: bool = False
    timer: asyncio.TimerHandle | None = None


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"


def _why_retry(exc: KubeError) -> str:
    if exc.status == 0:
        return "unreachable"
    return "throttled" if exc.status == 429 else "server_error"


def _hhmmss(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S")


class KubernetesExecutor:
    name = "kubernetes"
    uses_agent = True

    def __init__(
        self,
        settings: Settings,
        *,
        client: KubeClient | None = None,
        clock: Callable[[], float] = time.time,
        reap_interval: float = 1.0,
        agent_grace: float = 2.0,
        adopt_timeout: float = 30.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        self.settings = settings
        self.agent_endpoint: str | None = settings.agent_endpoint
        self.client = client
        self._own_client = client is None
        self._clock = clock
        self.reap_interval = reap_interval
        self.agent_grace = agent_grace
        self.adopt_timeout = adopt_timeout
        self._backoff = (backoff_base, backoff_cap)
        self.cache: PodCache | None = None
        self._report: Report | None = None
        self._tries: dict[Key, _Try] = {}
        self._by_name: dict[str, _Try] = {}
        self._gc_heap: list[tuple[float, str, str]] = []  # (due, uid, name)
        self._gc_scheduled: set[str] = set()  # uids: each pod deleted by GC once
        self._gc_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self._deletes: set[asyncio.Task[Any]] = set()
        # The latest pods GC deleted, by name (bounded: tests read it).
        self.gc_deleted: deque[str] = deque(maxlen=10_000)
        # Since when the apiserver has given no useful answer to our writes (None: it
        # answers); shared by every call, so `why` names when the outage began.
        self.unreachable_since: float | None = None
        self._waiting: set[Key] = set()

    @classmethod
    async def from_settings(cls, settings: Settings) -> KubernetesExecutor:
        client = await KubeClient.from_settings(settings)
        executor = cls(settings, client=client)
        executor._own_client = True
        return executor

    # ---- Executor protocol -------------------------------------------------------------

    async def start(self, report: Report) -> None:
        self._report = report
        if self.client is None:
            self.client = await KubeClient.from_settings(self.settings)
        self.cache = PodCache(
            self.client,
            on_change=self._on_change,
            backoff_base=self._backoff[0],
            backoff_cap=self._backoff[1],
            silence=self.settings.kube_watch_silence,
            clock=self._clock,
        )
        self.cache.start()
        self._tasks = [
            asyncio.create_task(self._reap_loop(), name="leoflow-kube-reaper"),
            asyncio.create_task(self._gc_loop(), name="leoflow-kube-gc"),
        ]

    async def stop(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        tasks: list[asyncio.Task[Any]] = [*self._tasks, *self._deletes]
        self._tasks = []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.cache is not None:
            await self.cache.stop()
        if self.client is not None and self._own_client:
            await self.client.close()
            self.client = None

    async def launch(self, launch: Launch) -> None:
        endpoint = self.agent_endpoint
        if not endpoint:
            raise LaunchError("no agent endpoint for task pods to dial (LEOFLOW_AGENT_ENDPOINT)")
        try:
            pod = build_pod(launch, self.settings, agent_endpoint=endpoint)
        except PodBuildError as exc:
            raise LaunchError(str(exc)) from exc
        assert self.client is not None, "start() first"
        key = (launch.ti_pk, launch.try_number)
        name = pod["metadata"]["name"]
        tracked = _Try(
            key,
            name,
            self._clock(),
            grace=launch.spec.execution.termination_grace_period_seconds,
            created=False,
        )
        self._track(tracked)
        try:
            await self._create(pod, tracked)
        except BaseException:
            self._untrack(tracked)
            raise
        # The pod exists from here: its pending and absence clocks start now.
        tracked.created = True
        tracked.launched_at = self._clock()
        tracked.absent_since = None
        record = self.cache.get(name) if self.cache is not None else None
        if record is not None:
            self._examine(tracked, record)

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        tracked = self._tries.get((ti_pk, try_number))
        if tracked is not None:
            tracked.cancelled = reason or "cancelled"
            if not tracked.created:
                return  # the create loop sees it and stops before a pod exists
            await self._delete_retrying(
                tracked.name, grace=tracked.grace, uid=None, component="dispatch"
            )
            return
        # Not one of ours in flight (reported already, or never adopted): a pod of that
        # try may still run; find it by its labels in the cache (rare, so a scan).
        if self.cache is None:
            return
        for record in self.cache.pods():
            if record.key == (ti_pk, try_number) and not record.terminal and not record.deleting:
                await self._delete_retrying(
                    record.name, grace=None, uid=record.uid, component="dispatch"
                )

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        """The tries whose pods exist (after a scheduler restart).

        Waits up to ``adopt_timeout`` for the cache to sync. A try whose pod has
        finished meanwhile is adopted too and its outcome reported at once from the
        pod's status, so the scheduler applies it instead of retrying the try. If
        the cache cannot sync in time every try is adopted: judging them absent from
        a cache that is not synced would be exactly the mistake DESIGN §7 forbids;
        the reaper judges them once it syncs.
        """
        assert self.cache is not None, "start() first"
        synced = await self.cache.wait_synced(True, timeout=self.adopt_timeout)
        now = self._clock()
        alive: set[Key] = set()
        for attempt in attempts:
            key = (attempt.ti_pk, attempt.try_number)
            name = pod_name(attempt.dag_id, attempt.task_id, attempt.ti_pk, attempt.try_number)
            record = self.cache.get(name) if synced else None
            if synced and record is None:
                continue
            created = parse_time(record.creation_timestamp) if record is not None else None
            tracked = _Try(key, name, min(created or now, now))
            self._track(tracked)
            alive.add(key)
            if record is not None:
                if record.terminal:
                    self._finish(tracked, terminal_outcome(record))
                else:
                    self._examine(tracked, record)
        if not synced:
            log.warning(
                "the pod cache did not sync within %s; adopting all %d tries until it does",
                _fmt(self.adopt_timeout),
                len(attempts),
            )
        return alive

    # ---- cache events ------------------------------------------------------------------

    def _on_change(self, old: PodRecord | None, new: PodRecord | None) -> None:
        if new is None:
            if old is not None:
                self._gc_scheduled.discard(old.uid)
            return
        if new.terminal and not new.deleting:
            self._schedule_gc(new)
        tracked = self._by_name.get(new.name)
        if tracked is not None:
            self._examine(tracked, new)

    def _examine(self, tracked: _Try, record: PodRecord) -> None:
        if tracked.finishing:
            return
        tracked.absent_since = None
        if record.terminal:
            # Give the agent's own report a head start; this one is the fallback.
            tracked.finishing = True
            outcome = terminal_outcome(record)
            loop = asyncio.get_running_loop()
            tracked.timer = loop.call_later(self.agent_grace, self._finish_later, tracked, outcome)
            self._timers.add(tracked.timer)
            return
        if record.deleting:
            return
        stuck = waiting_outcome(record)
        if stuck is not None:
            self._finish(tracked, stuck)
            self._spawn_delete(record.name, grace=0, uid=record.uid)

    def _finish_later(self, tracked: _Try, outcome: Outcome) -> None:
        if tracked.timer is not None:
            self._timers.discard(tracked.timer)
        if outcome.exit_code in AGENT_COULD_NOT_REPORT:
            # The agent never reached the control plane, so its own diagnostics are
            # only in the container log: put them where the user looks, the try's log.
            task = asyncio.create_task(self._finish_with_container_log(tracked, outcome))
            self._deletes.add(task)
            task.add_done_callback(self._deletes.discard)
            return
        self._finish(tracked, outcome)

    async def _finish_with_container_log(self, tracked: _Try, outcome: Outcome) -> None:
        try:
            assert self.client is not None
            text = await self.client.read_pod_log(tracked.name, tail_lines=200)
        except KubeError as exc:
            text = f"(the container log could not be read: {exc})\n"
        if self._report is not None and text:
            header = "[leoflow] the task's agent could not report; its container log follows\n"
            self._report(LogData(tracked.key[0], tracked.key[1], (header + text).encode()))
        self._finish(tracked, outcome)

    def _finish(self, tracked: _Try, outcome: Outcome) -> None:
        tracked.finishing = True
        self._untrack(tracked)
        if self._report is None:
            return
        self._report(
            TaskFinished(
                tracked.key[0],
                tracked.key[1],
                outcome.exit_code,
                outcome.reason,
                outcome.message,
                self._clock(),
            )
        )

    # ---- reaper: liveness and pending timeout --------------------------------------------

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.reap_interval)
            try:
                self.reap()
            except Exception:
                log.exception("the pod reaper failed; it runs again in %ss", self.reap_interval)

    def reap(self) -> None:
        """One pass over the tries in flight; reads only the cache."""
        cache = self.cache
        if cache is None:
            return
        now = self._clock()
        synced = cache.synced
        settings = self.settings
        for tracked in list(self._tries.values()):
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
                if tracked.cancelled is not None and absent >= min(
                    self.agent_grace, settings.pod_lost_grace
                ):
                    self._finish(
                        tracked,
                        Outcome(
                            EndReason.CANCELLED,
                            None,
                            f"cancelled ({tracked.cancelled}); the pod {tracked.name} was deleted",
                        ),
                    )
                elif absent > settings.pod_lost_grace:
                    self._finish(
                        tracked,
                        Outcome(
                            EndReason.LOST,
                            None,
                            f"the task's pod {tracked.name} disappeared without its agent "
                            f"reporting (absent from the synced pod cache for {_fmt(absent)}, "
                            f"grace pod_lost_grace {_fmt(settings.pod_lost_grace)}): its node "
                            "may have gone, or something else deleted the pod",
                        ),
                    )
                continue
            tracked.absent_since = None
            pending = now - tracked.launched_at
            if (
                record.phase == "Pending"
                and not record.deleting
                and pending > settings.pod_pending_timeout
            ):
                why = record.waiting_reason or record.scheduling_message or "not scheduled"
                if record.waiting_message:
                    why += f": {record.waiting_message}"
                self._finish(
                    tracked,
                    Outcome(
                        EndReason.PENDING_TIMEOUT,
                        None,
                        f"the task's pod stayed Pending for {_fmt(pending)} (limit "
                        f"pod_pending_timeout {_fmt(settings.pod_pending_timeout)}): {why}; "
                        "the pod was deleted",
                    ),
                )
                self._spawn_delete(record.name, grace=0, uid=record.uid)

    # ---- GC --------------------------------------------------------------------------------

    def _schedule_gc(self, record: PodRecord) -> None:
        if record.uid in self._gc_scheduled:
            return
        self._gc_scheduled.add(record.uid)
        now = self._clock()
        finished = parse_time(record.finished_at)
        base = min(finished, now) if finished is not None else now
        heapq.heappush(self._gc_heap, (base + self.settings.pod_gc_age, record.uid, record.name))
        self._gc_wakeup.set()

    async def _gc_loop(self) -> None:
        while True:
            self._gc_wakeup.clear()
            now = self._clock()
            due: list[tuple[str, str]] = []
            while self._gc_heap and self._gc_heap[0][0] <= now:
                _, uid, name = heapq.heappop(self._gc_heap)
                due.append((uid, name))
            for uid, name in due:
                record = self.cache.get(name) if self.cache is not None else None
                if record is None or record.uid != uid or record.deleting:
                    continue  # gone already, or someone is deleting it
                done = await self._delete(name, uid=uid, component="gc")
                if done:
                    self.gc_deleted.append(name)
                elif done is None:  # no answer: try again later, still once at most
                    retry = self._clock() + min(GC_RETRY, max(self.settings.pod_gc_age, 1.0))
                    heapq.heappush(self._gc_heap, (retry, uid, name))
            wait = self._gc_heap[0][0] - self._clock() if self._gc_heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._gc_wakeup.wait(), wait)

    # ---- apiserver writes --------------------------------------------------------------------

    async def _create(self, pod: dict[str, object], tracked: _Try) -> None:
        """Create the pod, riding out an apiserver that does not answer.

        The try stays queued meanwhile and keeps its admission slot: the slot is
        what the try will use the moment the apiserver is back, and handing it on
        would only start another DAG's launch that cannot reach the apiserver
        either; holding it keeps admission's accounting unchanged and the number
        of creates at recovery bounded by the slots (no thundering herd past
        parallelism), and the token bucket paces even those.
        """
        assert self.client is not None
        window = self.settings.kube_outage_window
        backoff = Backoff(RETRY_BASE, self.settings.kube_retry_cap)
        first_failure: float | None = None
        try:
            while True:
                if tracked.cancelled is not None:
                    raise LaunchError(
                        f"cancelled ({tracked.cancelled}) before the task's pod was created"
                    )
                try:
                    await self.client.create_pod(pod)
                except AlreadyExists:
                    pass  # launched already (a retry, or a restart): never a second pod
                except KubeError as exc:
                    if not exc.retryable:
                        self._answered()
                        raise LaunchError(f"the apiserver refused the task's pod: {exc}") from exc
                    now = self._clock()
                    since = self._unanswered()
                    if first_failure is None:
                        first_failure = now
                        self._note_waiting(tracked, since)
                    waited = now - first_failure
                    if waited >= window:
                        raise LaunchError(
                            f"creating the task's pod failed: the apiserver gave no useful "
                            f"answer for {_fmt(waited)} (kube_outage_window {_fmt(window)}); "
                            f"last: {exc}"
                        ) from exc
                    CALL_RETRIES.labels("create_pod", _why_retry(exc)).inc()
                    delay = min(max(backoff.next(), exc.retry_after or 0.0), window - waited)
                    log.warning(
                        "creating pod %s: %s; trying again in %.1fs", tracked.name, exc, delay
                    )
                    await asyncio.sleep(delay)
                    continue
                self._answered()
                return
        finally:
            if first_failure is not None:
                self._note_waiting(tracked, None)

    def _unanswered(self) -> float:
        if self.unreachable_since is None:
            self.unreachable_since = self._clock()
            APISERVER_UNREACHABLE.set(1)
        return self.unreachable_since

    def _answered(self) -> None:
        if self.unreachable_since is not None:
            self.unreachable_since = None
            APISERVER_UNREACHABLE.set(0)

    def _note_waiting(self, tracked: _Try, since: float | None) -> None:
        """Tell the scheduler why the try waits (``since`` None: it no longer does)."""
        if since is None:
            self._waiting.discard(tracked.key)
        else:
            self._waiting.add(tracked.key)
        LAUNCHES_WAITING.set(len(self._waiting))
        if self._report is None:
            return
        message = None
        if since is not None:
            message = (
                f"apiserver unreachable since {_hhmmss(since)} UTC; retrying (the try fails "
                f"if it lasts kube_outage_window {_fmt(self.settings.kube_outage_window)})"
            )
        self._report(
            LaunchWaiting(
                tracked.key[0],
                tracked.key[1],
                WaitNote.APISERVER_UNREACHABLE if since is not None else None,
                message,
                self._clock(),
            )
        )

    async def _delete(
        self,
        name: str,
        *,
        grace: int | None = None,
        uid: str | None = None,
        component: str = "gc",
    ) -> bool | None:
        """True: deleted; False: gone already (404) or another pod by now (409);
        None: it failed and may be worth trying again."""
        if self.client is None:
            return None
        try:
            deleted = await self.client.delete_pod(
                name,
                grace_seconds=grace,
                uid=uid,
                component="dispatch" if component == "dispatch" else "gc",
            )
        except KubeError as exc:
            if exc.status == 409:  # the uid precondition: a different pod by now
                self._answered()
                return False
            if exc.retryable:
                self._unanswered()
                CALL_RETRIES.labels("delete_pod", _why_retry(exc)).inc()
            log.warning("deleting pod %s failed: %s", name, exc)
            return None
        self._answered()
        return deleted

    async def _delete_retrying(
        self, name: str, *, grace: int | None, uid: str | None, component: str = "gc"
    ) -> bool:
        """Delete, trying again through an outage for up to ``kube_outage_window``."""
        backoff = Backoff(RETRY_BASE, self.settings.kube_retry_cap)
        deadline = self._clock() + self.settings.kube_outage_window
        while True:
            done = await self._delete(name, grace=grace, uid=uid, component=component)
            if done is not None:
                return done
            left = deadline - self._clock()
            if left <= 0:
                log.error(
                    "deleting pod %s: no answer within kube_outage_window %s; giving up",
                    name,
                    _fmt(self.settings.kube_outage_window),
                )
                return False
            await asyncio.sleep(min(backoff.next(), left))

    def _spawn_delete(self, name: str, *, grace: int | None, uid: str | None) -> None:
        if uid is not None:
            self._gc_scheduled.add(uid)  # GC must not delete it a second time
        task = asyncio.create_task(self._delete_retrying(name, grace=grace, uid=uid))
        self._deletes.add(task)
        task.add_done_callback(self._deletes.discard)

    # ---- bookkeeping -------------------------------------------------------------------------

    def _track(self, tracked: _Try) -> None:
        previous = self._tries.get(tracked.key)
        if previous is not None:
            self._untrack(previous)
        self._tries[tracked.key] = tracked
        self._by_name[tracked.name] = tracked

    def _untrack(self, tracked: _Try) -> None:
        if self._tries.get(tracked.key) is tracked:
            del self._tries[tracked.key]
        if self._by_name.get(tracked.name) is tracked:
            del self._by_name[tracked.name]

    @property
    def in_flight(self) -> int:
        """Tries launched or adopted whose outcome this executor has not reported."""
        return len(self._tries)
