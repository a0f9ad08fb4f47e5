"""ONE list+watch of task pods: the informer the reaper, GC and recovery read.

The loop is kopf's and client-go's reflector's: list (in pages) → replace the cache →
watch from the list's resourceVersion with bookmarks → on a clean end resume from
the last resourceVersion seen (bookmarks included) → on 410 Gone list again and
replace → on any other failure back off with jitter and resume.

``synced`` is True only while the cache is known to be complete: after a list, and
while a watch is open. It turns False as soon as the watch breaks and stays False
until a watch is open again (resumed) or a list has replaced the cache, because
nothing may be judged lost from a cache that may have missed a deletion or a
creation (docs/ARCHITECTURE.md, Kubernetes).

A watch can also die without breaking: the connection stays open and nothing
arrives, not even the bookmark an apiserver sends about once a minute. A watch
silent for ``silence`` seconds is given up (not synced) and resumed from the last
resourceVersion (a list again on 410). ``heard_at`` is when the cache last heard
from the apiserver (an event, a bookmark, a list): the reaper counts a pod's
absence only up to it, so a silent stretch never counts as evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterable

from leoflow.kube.client import KubeClient
from leoflow.kube.errors import Gone, KubeError
from leoflow.kube.metrics import CACHE_PODS, CACHE_SYNCED, WATCH_RESTARTS, WATCH_SILENT
from leoflow.kube.objects import JsonObj
from leoflow.kube.pod import SELECTOR
from leoflow.kube.records import PodRecord, parse_pod

log = logging.getLogger("leoflow.kube.podcache")

OnChange = Callable[[PodRecord | None, PodRecord | None], None]


class Backoff:
    """Exponential backoff with jitter: each delay in [d/2, d], d doubling up to ``cap``."""

    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        delay = float(min(self.cap, self.base * (2.0 ** min(self.failures, 30))))
        self.failures += 1
        return delay / 2 + random.uniform(0, delay / 2)

    def reset(self) -> None:
        self.failures = 0


class SilentWatch(KubeError):
    """Nothing arrived on an open watch, not even a bookmark, for too long."""


class PodCache:
    """Task pods in the task namespace, by name, kept current by one watch."""

    def __init__(
        self,
        client: KubeClient,
        *,
        label_selector: str = SELECTOR,
        on_change: OnChange | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        silence: float = 120.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.silence = silence
        self._clock = clock
        self.heard_at = 0.0
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = Backoff(backoff_base, backoff_cap)
        self.resource_version: str | None = None
        self.lists = 0  # how many times the cache was (re)listed
        self._pods: dict[str, PodRecord] = {}
        self._listeners: list[OnChange] = [on_change] if on_change is not None else []
        self._synced = False
        self._sync_changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ---- reading -----------------------------------------------------------------

    @property
    def synced(self) -> bool:
        return self._synced

    def get(self, name: str) -> PodRecord | None:
        return self._pods.get(name)

    def pods(self) -> list[PodRecord]:
        return list(self._pods.values())

    def __len__(self) -> int:
        return len(self._pods)

    def add_listener(self, on_change: OnChange) -> None:
        self._listeners.append(on_change)

    async def wait_synced(self, value: bool = True, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until ``synced`` is ``value``; False if ``timeout`` ran out first."""
        try:
            async with asyncio.timeout(timeout), self._sync_changed:
                await self._sync_changed.wait_for(lambda: self._synced is value)
        except TimeoutError:
            return False
        return True

    # ---- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name="leoflow-pod-cache")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._set_synced(False)

    # ---- the loop ----------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if self.resource_version is None:
                    await self._list()
                opened = asyncio.get_running_loop().time()
                await self._watch()
                # A clean end: the server's timeoutSeconds ran out. Resume at once,
                # unless the server keeps ending watches as soon as they open.
                WATCH_RESTARTS.labels("timeout").inc()
                if asyncio.get_running_loop().time() - opened < 1.0:
                    await asyncio.sleep(self.backoff.next())
            except SilentWatch as exc:
                WATCH_RESTARTS.labels("silent").inc()
                WATCH_SILENT.inc()
                await self._set_synced(False)
                log.warning(
                    "pod watch: %s; resuming from resourceVersion %s",
                    exc.message,
                    self.resource_version,
                )
            except Gone as exc:
                WATCH_RESTARTS.labels("gone").inc()
                log.info("pod watch: %s; listing again", exc.message)
                self.resource_version = None
                await self._set_synced(False)
            except KubeError as exc:
                WATCH_RESTARTS.labels("dropped" if exc.status == 0 else "error").inc()
                await self._set_synced(False)
                delay = self.backoff.next()
                log.warning("pod watch: %s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
            except (ValueError, KeyError, TypeError) as exc:
                # A body we cannot read: start over from a list rather than guess.
                WATCH_RESTARTS.labels("error").inc()
                self.resource_version = None
                await self._set_synced(False)
                delay = self.backoff.next()
                log.error("pod watch: unreadable data (%s); listing again in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        fresh: dict[str, PodRecord] = {}
        token: str | None = None
        rv = ""
        while True:
            page = await self.client.list_pods(
                self.label_selector, limit=self.page_size, continue_token=token
            )
            meta = page.get("metadata") or {}
            if not rv:
                rv = str(meta.get("resourceVersion") or "")
            for item in page.get("items") or ():
                record = parse_pod(item)
                fresh[record.name] = record
            token = meta.get("continue") or None
            if not token:
                break
        self.lists += 1
        self._replace(fresh)
        self.resource_version = rv
        self.heard_at = self._clock()
        self.backoff.reset()
        await self._set_synced(True)

    async def _watch(self) -> None:
        assert self.resource_version is not None
        async with self.client.watch_pods(
            self.label_selector,
            self.resource_version,
            timeout_seconds=int(self.watch_timeout * random.uniform(1.0, 1.2)),
        ) as stream:
            # The server took the watch: resumed without a gap, unless it now says 410.
            await self._set_synced(True)
            self.backoff.reset()
            events = stream.events()
            try:
                while True:
                    try:
                        async with asyncio.timeout(self.silence):
                            kind, obj = await anext(events)
                    except StopAsyncIteration:
                        return
                    except TimeoutError:
                        raise SilentWatch(
                            0,
                            "Silent",
                            f"nothing (not even a bookmark) for {self.silence:g}s on an open "
                            "watch: it is dead",
                        ) from None
                    self._apply(kind, obj)
                    self.heard_at = self._clock()
            finally:
                await events.aclose()

    def _apply(self, kind: str, obj: JsonObj) -> None:
        meta = obj.get("metadata") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            message = str(obj.get("message") or obj)
            if code == 410:
                raise Gone(410, str(obj.get("reason") or "Expired"), message, obj)
            raise KubeError(code, str(obj.get("reason") or "Error"), message, obj)
        rv = meta.get("resourceVersion")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = str(rv)
            return
        record = parse_pod(obj)
        if kind == "DELETED":
            old = self._pods.pop(record.name, None)
            if old is not None:
                self._emit(old, None)
        elif kind in ("ADDED", "MODIFIED"):
            old = self._pods.get(record.name)
            self._pods[record.name] = record
            if old != record:
                self._emit(old, record)
        if rv:
            self.resource_version = str(rv)

    def feed(self, kind: str, obj: JsonObj) -> None:
        """Apply one watch event as if it came off the wire (benchmarks, tests)."""
        self._apply(kind, obj)

    def feed_line(self, line: bytes) -> None:
        event = json.loads(line)
        self._apply(event.get("type", ""), event.get("object") or {})

    def _replace(self, fresh: dict[str, PodRecord]) -> None:
        old_pods, self._pods = self._pods, fresh
        for name, gone in old_pods.items():
            if name not in fresh:
                self._emit(gone, None)
        for name, record in fresh.items():
            before = old_pods.get(name)
            if before != record:
                self._emit(before, record)

    def _emit(self, old: PodRecord | None, new: PodRecord | None) -> None:
        CACHE_PODS.set(len(self._pods))
        for listener in self._listeners:
            try:
                listener(old, new)
            except Exception:
                log.exception("a pod cache listener failed")

    async def _set_synced(self, value: bool) -> None:
        if self._synced is value:
            return
        self._synced = value
        CACHE_SYNCED.set(1 if value else 0)
        async with self._sync_changed:
            self._sync_changed.notify_all()

    def records(self) -> Iterable[PodRecord]:
        return self._pods.values()
