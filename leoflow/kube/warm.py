"""Warm task pods: tries of one DAG and pod shape run one after another in a pod.

The leader keeps, per (DAG, shape), a queue of admitted tries waiting for a pod, and
the warm pods it knows. A pod asks for work (``next_task``, over its agent's Channel
with its pod token); asking means its previous task is over. A try goes to a pod that
is asking, else waits; a pod is created only while more tries wait than pods are
starting, and never past the DAG's ``max_pods`` (admission is the scheduler's: a
queued try already holds its slot, an idle pod holds none).

A pod that ends or vanishes while it runs a try costs that try nothing: it is
reported ``agent_died`` and retried without spending a retry (the agent's own
Complete, when it came first, has already settled the try and this report is
ignored). A pod that ends before it ever asked for work fails one waiting try with
its pod's outcome, as a pod of its own would have, so a shape that cannot start
does not make pods forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from leoflow.domain.credentials import issue_ticket
from leoflow.domain.execution import Launch, LaunchWaiting, Report, TaskFinished
from leoflow.domain.reasons import EndReason, WaitNote
from leoflow.domain.warm_pods import NextWork, PodTicketUse, ReusePods
from leoflow.kube import metrics
from leoflow.kube.objects import JsonObj
from leoflow.kube.records import Outcome, PodRecord, terminal_outcome, waiting_outcome
from leoflow.kube.tries import Key
from leoflow.kube.warm_pod import build_warm_pod, warm_pod_name
from leoflow.kube.warm_records import WarmPod, WarmStats, Work

log = logging.getLogger("leoflow.kube.warm")

Shape = tuple[str, str]  # (dag_id, shape)


class WarmPool:
    def __init__(
        self,
        *,
        create: Callable[[JsonObj, Key], Awaitable[None]],
        delete: Callable[[str, str | None], None],
        report: Callable[[], Report | None],
        clock: Callable[[], float],
        pending_timeout: float,
    ) -> None:
        self._create = create
        self._delete = delete
        self._report = report
        self._clock = clock
        self._pending_timeout = pending_timeout
        self.queues: dict[Shape, deque[Work]] = {}
        self.works: dict[Key, Work] = {}
        self.pods: dict[str, WarmPod] = {}
        self._tickets: dict[str, str] = {}  # ticket hash -> pod name, until used
        self._creating: set[asyncio.Task[None]] = set()
        self.stats = WarmStats()

    def __len__(self) -> int:
        return len(self.works)

    # ---- the executor's side -------------------------------------------------------

    def submit(self, launch: Launch, template: JsonObj, shape: str, reuse: ReusePods) -> None:
        key = (launch.ti_pk, launch.try_number)
        work = Work(key, launch.dag_id, launch.ticket or "", shape, template, reuse)
        self.works[key] = work
        self.queues.setdefault((launch.dag_id, shape), deque()).append(work)
        self._dispatch(launch.dag_id, shape)

    def cancel(self, key: Key, reason: str) -> bool:
        """True when the try is one of ours: queued (ended now) or running (its pod is
        deleted, and the try ends when the pod does)."""
        work = self.works.get(key)
        if work is None:
            return False
        work.cancelled = reason or "cancelled"
        for pod in self.pods.values():
            if pod.running is work:
                pod.retiring = True
                self._delete(pod.name, pod.uid)
                return True
        self.works.pop(key, None)
        self._finish(work, EndReason.CANCELLED, f"cancelled ({work.cancelled}) before it ran")
        return True

    def adopt_running(self, key: Key, pod_name: str, nth: int, record: PodRecord | None) -> None:
        """After a failover: a try the store says runs in this warm pod. The pod is
        known from here on (its DAG from its token when it next asks for work)."""
        pod = self.pods.get(pod_name)
        if pod is None:
            shape = record.shape if record is not None and record.shape else ""
            pod = WarmPod(pod_name, "", shape, ReusePods(), self._clock())
            self.pods[pod_name] = pod
        if record is not None:
            pod.uid = record.uid
        pod.asked, pod.pending, pod.tasks = True, False, max(pod.tasks, nth)
        pod.running = Work(key, pod.dag_id, "", pod.shape, {}, pod.reuse)
        self.works[key] = pod.running

    def stop(self) -> None:
        for pod in self.pods.values():
            if pod.waiter is not None and not pod.waiter.done():
                pod.waiter.cancel()
        for task in self._creating:
            task.cancel()

    # ---- the agent endpoint's side ---------------------------------------------------

    def try_ending(self, key: Key) -> None:
        work = self.works.get(key)
        if work is None:
            return
        for pod in self.pods.values():
            if pod.running is work:
                pod.finishing = True
                return

    def use_pod_ticket(self, ticket_hash: str) -> PodTicketUse | None:
        name = self._tickets.pop(ticket_hash, None)
        pod = self.pods.get(name) if name is not None else None
        if pod is None:
            return None
        pod.ticket_hash = None
        return PodTicketUse(
            pod.name, pod.dag_id, pod.shape, pod.reuse.idle_timeout, pod.reuse.max_tasks_per_pod
        )

    async def next_task(
        self, pod_name: str, dag_id: str, shape: str, *, done: int, wait: float, drained: str
    ) -> NextWork:
        pod = self.pods.get(pod_name)
        if pod is not None and not pod.dag_id:  # adopted from a running try
            pod.dag_id = dag_id
            self._learn_reuse(pod)
        if pod is None or pod.dag_id != dag_id or pod.shape != shape:
            return NextWork(retire=True, reason="this scheduler does not know the pod")
        pod.asked, pod.pending = True, False
        self._end_running(pod, done)
        if drained and not self.queues.get((dag_id, shape)):
            # Paused or deleted: its runs already going still run (and may use the
            # pod), but an idle pod leaves now rather than after idle_timeout.
            return self._retire(pod, drained)
        if pod.retiring:
            return self._retire(pod, "the pod is being retired")
        if pod.tasks >= pod.reuse.max_tasks_per_pod:
            return self._retire(pod, f"it ran max_tasks_per_pod ({pod.reuse.max_tasks_per_pod})")
        work = self._take(dag_id, shape)
        if work is None:
            if pod.waiter is not None and not pod.waiter.done():
                pod.waiter.cancel()  # a second ask: the first's stream is gone
            loop = asyncio.get_running_loop()
            pod.waiter = waiter = loop.create_future()
            self._dispatch(dag_id, shape)
            try:
                async with asyncio.timeout(wait):
                    work = await waiter
            except TimeoutError:
                pod.waiter = None
                if not waiter.done() or waiter.cancelled() or waiter.result() is None:
                    return self._retire(pod, f"idle for idle_timeout ({pod.reuse.idle_timeout:g}s)")
                work = waiter.result()  # handed over just as the wait ran out
            except asyncio.CancelledError:
                if pod.waiter is waiter:
                    pod.waiter = None
                raise
            if work is None:
                return self._retire(pod, "the pod is being deleted")
        else:
            self._hand(pod, work)
        return NextWork(ticket=work.ticket)

    # ---- the pod cache's side ------------------------------------------------------------

    def on_pod(self, record: PodRecord | None, name: str) -> None:
        pod = self.pods.get(name)
        if pod is None:
            return
        if record is None:
            self._gone(pod, f"the warm pod {name} was deleted")
            return
        pod.uid = record.uid
        pod.pending = record.phase == "Pending"
        if record.terminal:
            self._gone(pod, terminal_outcome(record).message, record)
            return
        if record.deleting:
            pod.retiring = True
            if pod.waiter is not None and not pod.waiter.done():
                pod.waiter.set_result(None)  # an idle pod being deleted: retire it now
            return
        stuck = waiting_outcome(record)
        if stuck is not None and not pod.asked:
            self._fail_one(pod, stuck)
            pod.retiring = True
            self._delete(pod.name, pod.uid)

    def reap(self, now: float) -> None:
        for pod in list(self.pods.values()):
            if pod.pending and not pod.retiring and now - pod.created_at > self._pending_timeout:
                self._fail_one(
                    pod,
                    Outcome(
                        EndReason.PENDING_TIMEOUT,
                        None,
                        f"the warm pod {pod.name} stayed Pending past pod_pending_timeout; "
                        "the pod was deleted",
                    ),
                )
                pod.retiring = True
                self._delete(pod.name, pod.uid)

    def pods_of(self, dag_id: str) -> list[WarmPod]:
        return [p for p in self.pods.values() if p.dag_id == dag_id]

    def _count(self, dag_id: str) -> None:
        metrics.WARM_PODS.labels(dag_id).set(len(self.pods_of(dag_id)))

    # ---- inside ----------------------------------------------------------------------

    def _learn_reuse(self, pod: WarmPod) -> None:
        for work in self.works.values():
            if work.dag_id == pod.dag_id and work.shape == pod.shape:
                pod.reuse = work.reuse
                return

    def _take(self, dag_id: str, shape: str) -> Work | None:
        queue = self.queues.get((dag_id, shape))
        while queue:
            work = queue.popleft()
            if work.cancelled is None and self.works.get(work.key) is work:
                return work
        return None

    def _hand(self, pod: WarmPod, work: Work) -> None:
        pod.running = work
        pod.tasks += 1
        self.stats.handed += 1
        if len(self.stats.handed_at) >= 4096:
            self.stats.handed_at.clear()
        self.stats.handed_at[work.key] = self._clock()
        if work.note is not None:
            work.note = None
            self._note(work, None, None)

    def _end_running(self, pod: WarmPod, done: int) -> None:
        """The pod asks again: its try is over. A pod that ran fewer tasks than it was
        handed lost the last hand-over (its stream broke): that try never started."""
        work, pod.running, pod.finishing = pod.running, None, False
        if work is None:
            return
        if self.works.get(work.key) is work:
            del self.works[work.key]
            if done < pod.tasks:
                self._finish(
                    work,
                    EndReason.AGENT_DIED,
                    f"the warm pod {pod.name} did not receive this try (its connection "
                    "broke during the hand-over); it is retried without counting against "
                    "the task's retries",
                )

    def _retire(self, pod: WarmPod, why: str) -> NextWork:
        pod.retiring = True
        kind = why.split(" (")[0]
        self.stats.retired[kind] = self.stats.retired.get(kind, 0) + 1
        metrics.WARM_POD_RETIREMENTS.labels(kind).inc()
        log.info("warm pod %s retires: %s", pod.name, why)
        self._dispatch(pod.dag_id, pod.shape)
        return NextWork(retire=True, reason=why)

    def _gone(self, pod: WarmPod, why: str, record: PodRecord | None = None) -> None:
        if self.pods.pop(pod.name, None) is not None:
            self._count(pod.dag_id)
        if pod.ticket_hash is not None:
            self._tickets.pop(pod.ticket_hash, None)
        if pod.waiter is not None and not pod.waiter.done():
            pod.waiter.cancel()
        work, pod.running = pod.running, None
        if work is not None and self.works.get(work.key) is work:
            del self.works[work.key]
            if work.cancelled is not None:
                self._finish(work, EndReason.CANCELLED, f"cancelled ({work.cancelled})")
            else:
                self._finish(
                    work,
                    EndReason.AGENT_DIED,
                    f"the warm pod {pod.name} ended while this try ran ({why}); it is "
                    "retried without counting against the task's retries",
                )
        elif not pod.asked and record is not None:
            self._fail_one(pod, terminal_outcome(record))
        self._dispatch(pod.dag_id, pod.shape)

    def _fail_one(self, pod: WarmPod, outcome: Outcome) -> None:
        work = self._take(pod.dag_id, pod.shape)
        if work is not None:
            del self.works[work.key]
            self._finish(work, outcome.reason, outcome.message, outcome.exit_code)

    def _dispatch(self, dag_id: str, shape: str) -> None:
        queue = self.queues.get((dag_id, shape))
        if not queue:
            return
        same = [p for p in self.pods.values() if p.dag_id == dag_id and p.shape == shape]
        for pod in same:
            if pod.waiter is not None and not pod.waiter.done() and not pod.retiring:
                work = self._take(dag_id, shape)
                if work is None:
                    return
                self._hand(pod, work)
                pod.waiter.set_result(work)
        waiting = [w for w in queue if w.cancelled is None and self.works.get(w.key) is w]
        if not waiting:
            queue.clear()
            return
        reuse = waiting[0].reuse
        coming = sum(1 for p in same if self._coming(p))
        live = sum(1 for p in self.pods.values() if p.dag_id == dag_id)
        for _ in range(min(len(waiting) - coming, reuse.max_pods - live)):
            self._start_pod(waiting[0], reuse)
        starting = sum(1 for p in same if not p.asked and not p.retiring)
        for work in waiting:
            if starting:
                self._note(
                    work,
                    WaitNote.WARM_POD_STARTING,
                    "admitted (it holds its slots); waiting for a warm pod to start",
                )
            else:
                self._note(
                    work,
                    WaitNote.WARM_POD_LIMIT,
                    "admitted (it holds its slots); waiting for a warm pod of its shape to "
                    f"free up (max_pods {reuse.max_pods} of DAG {dag_id!r} in use)",
                )

    @staticmethod
    def _coming(pod: WarmPod) -> bool:
        """Will ask for work soon: starting, or its try has just ended."""
        if pod.retiring:
            return False
        if not pod.asked:
            return True
        return pod.finishing and pod.tasks < pod.reuse.max_tasks_per_pod

    def _start_pod(self, work: Work, reuse: ReusePods) -> None:
        dag_id = work.dag_id
        name = warm_pod_name(dag_id, work.shape)
        ticket, ticket_hash = issue_ticket()
        pod = WarmPod(name, dag_id, work.shape, reuse, self._clock(), ticket_hash=ticket_hash)
        self.pods[name] = pod
        self._count(dag_id)
        self._tickets[ticket_hash] = name
        manifest = build_warm_pod(
            work.template, name=name, shape=work.shape, ticket=ticket, reuse=reuse
        )
        self.stats.created += 1
        task = asyncio.create_task(self._create_pod(pod, manifest, work.key))
        self._creating.add(task)
        task.add_done_callback(self._creating.discard)

    async def _create_pod(self, pod: WarmPod, manifest: JsonObj, key: Key) -> None:
        try:
            await self._create(manifest, key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("warm pod %s could not be created: %s", pod.name, exc)
            self.pods.pop(pod.name, None)
            if pod.ticket_hash is not None:
                self._tickets.pop(pod.ticket_hash, None)
            self._fail_one(
                pod, Outcome(EndReason.LAUNCH_FAILED, None, f"the warm pod was refused: {exc}")
            )
            self._dispatch(pod.dag_id, pod.shape)

    def _note(self, work: Work, reason: str | None, message: str | None) -> None:
        if work.note == message:
            return
        work.note = message
        report = self._report()
        if report is not None:
            report(LaunchWaiting(work.key[0], work.key[1], reason, message, self._clock()))

    def _finish(self, work: Work, reason: str, message: str, code: int | None = None) -> None:
        report = self._report()
        if report is not None:
            report(TaskFinished(work.key[0], work.key[1], code, reason, message, self._clock()))

    async def drain_creates(self) -> None:
        for task in list(self._creating):
            with contextlib.suppress(BaseException):
                await task
