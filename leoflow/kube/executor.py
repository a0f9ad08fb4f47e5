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
  terminal, each pod deleted once;
- ownership: every pod is owned by its DAG's GC anchor (``dag_anchor``), so the
  cluster's garbage collector deletes a deleted DAG's pods.

apiserver cost is O(1) in running tasks: one watch, plus creates and deletes.

Collaborators, a file each: ``tries`` (the tries in flight), ``liveness`` (what the
reaper concludes), ``try_outcomes`` (how an outcome is reported), ``pod_writes``
(creates and deletes through outages), ``promised_work`` (what stop still sends),
``pod_gc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence

from leoflow.domain.execution import Attempt, Launch, LaunchError, Report
from leoflow.kube.client import KubeClient
from leoflow.kube.dag_anchor import DagAnchors
from leoflow.kube.liveness import reap_verdicts
from leoflow.kube.objects import JsonObj
from leoflow.kube.pod import LABEL_SHAPE, PodBuildError, build_pod, pod_name
from leoflow.kube.pod_gc import PodGc
from leoflow.kube.pod_writes import PodWrites
from leoflow.kube.podcache import Backoff, PodCache
from leoflow.kube.promised_work import PromisedWork
from leoflow.kube.records import PodRecord, parse_time, terminal_outcome
from leoflow.kube.tries import Key, Tries, Try, fmt_seconds
from leoflow.kube.try_outcomes import TryOutcomes
from leoflow.kube.warm import WarmPool
from leoflow.kube.warm_pod import pod_shape, warm_ref
from leoflow.settings import Settings

log = logging.getLogger("leoflow.kube.executor")


class KubernetesExecutor:
    name = "kubernetes"
    uses_agent = True
    agents_dial_here = False  # a pod's agent may reach any replica

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
        agent_endpoint: str | None = None,
    ) -> None:
        self.settings = settings
        # What task pods dial: the runtime passes the endpoint's address (the configured
        # LEOFLOW_AGENT_ENDPOINT when set); built alone, the setting.
        self.agent_endpoint = agent_endpoint or settings.agent_endpoint
        self.client = client
        self._own_client = client is None
        self._clock = clock
        self.reap_interval = reap_interval
        self.adopt_timeout = adopt_timeout
        self._backoff = (backoff_base, backoff_cap)
        self.cache: PodCache | None = None
        self._report: Report | None = None
        self._tries = Tries()
        self._gc = PodGc(settings.pod_gc_age, clock)
        self._writes = PodWrites(settings, lambda: self.client, lambda: self._report, clock)
        self.anchors = DagAnchors(
            lambda: self.client,
            settings.task_namespace,
            clock,
            busy=lambda: {t.dag_id for t in self._tries.by_key.values()},
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._work = PromisedWork()
        self._outcomes = TryOutcomes(
            self._tries,
            report=lambda: self._report,
            client=lambda: self.client,
            clock=clock,
            agent_grace=agent_grace,
            work=self._work,
            delete_now=lambda record: self._spawn_delete(record.name, grace=0, uid=record.uid),
        )
        # Warm pods (``kubernetes.reuse_pods``): the agent endpoint reaches it here.
        self.warm_pool = WarmPool(
            create=self._create_warm,
            delete=lambda name, uid: self._spawn_delete(name, grace=None, uid=uid),
            report=lambda: self._report,
            clock=clock,
            pending_timeout=settings.pod_pending_timeout,
        )

    @property
    def agent_grace(self) -> float:
        """How long a finished pod's outcome waits for the agent's own report."""
        return self._outcomes.agent_grace

    @property
    def gc_deleted(self) -> deque[str]:
        """The latest pods GC deleted, by name (bounded)."""
        return self._gc.deleted

    @property
    def unreachable_since(self) -> float | None:
        """Since when the apiserver has given no useful answer to our writes."""
        return self._writes.unreachable_since

    @classmethod
    async def from_settings(cls, settings: Settings) -> KubernetesExecutor:
        client = await KubeClient.from_settings(settings)
        executor = cls(settings, client=client)
        executor._own_client = True
        return executor

    # ---- Executor protocol -------------------------------------------------------------

    async def warm(self) -> None:
        """Nothing to prepare: the pod cache's list and watch begin with ``start``."""

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
            asyncio.create_task(
                self._gc.run(self._cached, self._gc_delete), name="leoflow-kube-gc"
            ),
            asyncio.create_task(self.anchors.run(Backoff(*self._backoff)), name="leoflow-anchors"),
        ]

    async def stop(self) -> None:
        self._outcomes.cancel_timers()
        loops: list[asyncio.Task[None]] = self._tasks
        self._tasks = []
        for task in loops:
            task.cancel()
        for task in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.warm_pool.stop()
        await self._work.finish(self.settings.kube_stop_timeout, self.settings.task_namespace)
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
        reuse = launch.reuse_pods or self.settings.reuse_pods_default
        if reuse is not None:
            self.warm_pool.submit(launch, pod, pod_shape(pod), reuse)
            return
        key = (launch.ti_pk, launch.try_number)
        name = pod["metadata"]["name"]
        tracked = Try(
            key,
            name,
            self._clock(),
            grace=launch.spec.execution.termination_grace_period_seconds,
            created=False,
            dag_id=launch.dag_id,
        )
        self._tries.track(tracked)

        async def owned() -> None:  # every task pod is owned by its DAG's GC anchor
            pod["metadata"]["ownerReferences"] = [await self.anchors.ensure(launch.dag_id)]

        try:
            await self._writes.create(pod, tracked, owned)
        except BaseException:
            self._tries.untrack(tracked)
            raise
        # The pod exists from here: its pending and absence clocks start now.
        tracked.created = True
        tracked.launched_at = self._clock()
        tracked.absent_since = None
        record = self.cache.get(name) if self.cache is not None else None
        if record is not None:
            self._outcomes.examine(tracked, record)

    async def _create_warm(self, pod: JsonObj, key: Key) -> None:
        """Create a warm pod; ``key``: the try it is made for (its outage note)."""
        work = self.warm_pool.works.get(key)
        shape = pod["metadata"].get("labels", {}).get(LABEL_SHAPE)

        async def owned() -> None:  # owned by its DAG's GC anchor, as every task pod
            if work is not None:
                shapes = (shape,) if shape else ()
                ref = await self.anchors.ensure(work.dag_id, shapes)
                pod["metadata"]["ownerReferences"] = [ref]

        await self._writes.create(pod, Try(key, pod["metadata"]["name"], self._clock()), owned)

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        if self.warm_pool.cancel((ti_pk, try_number), reason):
            return
        tracked = self._tries.by_key.get((ti_pk, try_number))
        if tracked is not None:
            tracked.cancelled = reason or "cancelled"
            if not tracked.created:
                return  # the create loop sees it and stops before a pod exists
            await self._writes.delete_retrying(
                tracked.name, grace=tracked.grace, uid=None, component="dispatch"
            )
            return
        # Not one of ours in flight (reported already, or never adopted): a pod of that
        # try may still run; find it by its labels in the cache (rare, so a scan).
        if self.cache is None:
            return
        for record in self.cache.pods():
            if record.key == (ti_pk, try_number) and not record.terminal and not record.deleting:
                await self._writes.delete_retrying(
                    record.name, grace=None, uid=record.uid, component="dispatch"
                )

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        """The tries whose pods exist (after a scheduler restart).

        Waits up to ``adopt_timeout`` for the cache to sync. A try whose pod has
        finished meanwhile is adopted too and its outcome reported at once from the
        pod's status, so the scheduler applies it instead of retrying the try. If
        the cache cannot sync in time every try is adopted: judging them absent from
        a cache that is not synced is what the pod cache's contract forbids;
        the reaper judges them once it syncs.
        """
        assert self.cache is not None, "start() first"
        synced = await self.cache.wait_synced(True, timeout=self.adopt_timeout)
        now = self._clock()
        alive: set[Key] = set()
        for attempt in attempts:
            key = (attempt.ti_pk, attempt.try_number)
            warm = warm_ref(attempt.executor_ref)
            if warm is not None:  # started in a warm pod: alive while that pod is
                record = self.cache.get(warm[0]) if synced else None
                if synced and (record is None or record.terminal or record.deleting):
                    continue
                self.warm_pool.adopt_running(key, warm[0], warm[1], record)
                alive.add(key)
                continue
            name = pod_name(attempt.dag_id, attempt.task_id, attempt.ti_pk, attempt.try_number)
            record = self.cache.get(name) if synced else None
            if synced and record is None:
                continue
            created = parse_time(record.creation_timestamp) if record is not None else None
            tracked = Try(key, name, min(created or now, now), dag_id=attempt.dag_id)
            self._tries.track(tracked)
            alive.add(key)
            if record is not None:
                if record.terminal:
                    self._outcomes.finish(tracked, terminal_outcome(record))
                else:
                    self._outcomes.examine(tracked, record)
        if not synced:
            log.warning(
                "the pod cache did not sync within %s; adopting all %d tries until it does",
                fmt_seconds(self.adopt_timeout),
                len(attempts),
            )
        return alive

    def _cached(self, name: str) -> PodRecord | None:
        return self.cache.get(name) if self.cache is not None else None

    # ---- cache events ------------------------------------------------------------------

    def _on_change(self, old: PodRecord | None, new: PodRecord | None) -> None:
        either = new or old
        if either is not None and either.shape is not None:
            self.warm_pool.on_pod(new, either.name)
        if new is None:
            if old is not None:
                self._gc.forget(old.uid)
            return
        if new.terminal and not new.deleting:
            self._gc.schedule(new)
        tracked = self._tries.by_name.get(new.name)
        if tracked is not None:
            self._outcomes.examine(tracked, new)

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
        self.warm_pool.reap(now)
        tries = list(self._tries.by_key.values())
        for tracked, outcome, stuck in reap_verdicts(
            tries, cache, now, self.settings, self.agent_grace
        ):
            if stuck is None:
                # Its anchor may be gone (the pod went with it): ask before the next pod.
                self.anchors.forget(tracked.dag_id)
            self._outcomes.finish(tracked, outcome)
            if stuck is not None:
                self._spawn_delete(stuck.name, grace=0, uid=stuck.uid)

    # ---- deletes ---------------------------------------------------------------------------

    async def _gc_delete(self, name: str, uid: str) -> bool | None:
        return await self._writes.delete(name, uid=uid, component="gc")

    def _spawn_delete(self, name: str, *, grace: int | None, uid: str | None) -> None:
        if uid is not None:
            self._gc.claim(uid)  # GC must not delete it a second time
        self._work.spawn(self._writes.delete_retrying(name, grace=grace, uid=uid))

    def keep_dags(self, keep: Mapping[str, float | None] | Collection[str]) -> None:
        """The DAGs that exist, each kept until a time (None: for good): every other
        DAG's GC anchor is deleted, and the cluster's garbage collector deletes its pods
        (in the background: returns at once)."""
        if not isinstance(keep, Mapping):
            keep = dict.fromkeys(keep)
        self.anchors.keep_only(keep)

    @property
    def in_flight(self) -> int:
        """Tries launched or adopted whose outcome this executor has not reported."""
        return len(self._tries) + len(self.warm_pool)
