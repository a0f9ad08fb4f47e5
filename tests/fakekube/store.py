"""An etcd-like object store: one global revision counter, an event history, compaction.

Every write bumps one counter shared by all resources (as etcd's revision does), so
resourceVersions are monotonic across pods and leases and a watcher can resume from
any of them. The history keeps each event with the object *before* the change,
because the apiserver's watch cache needs both to decide whether a label-selector
watcher sees ADDED, MODIFIED or DELETED. Compaction drops history up to a revision:
a watch resuming from before it gets 410 Expired.

Single-threaded by design: every method runs on the event loop without awaiting, so
a watcher that snapshots history and subscribes in one call can never miss an event.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

JsonObj = dict[str, Any]
Key = tuple[str, str, str]  # (resource, namespace, name); resource "pods", "configmaps" or "leases"


def _clone(obj: JsonObj) -> JsonObj:
    """A deep copy; a pickle round trip is 3-4x faster than ``copy.deepcopy`` on a pod,
    which a thousand-pod benchmark does a dozen times per pod."""
    clone: JsonObj = pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    return clone


@dataclass(frozen=True)
class StoreEvent:
    """One change: ``obj`` is the new state (for DELETED: the last state, new RV)."""

    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    resource: str
    namespace: str
    obj: JsonObj
    prev: JsonObj | None


@dataclass(eq=False)
class Subscription:
    """A live feed of store events for one resource (and optionally one namespace)."""

    resource: str
    namespace: str | None
    queue: asyncio.Queue[StoreEvent | None] = field(default_factory=asyncio.Queue)

    def wants(self, event: StoreEvent) -> bool:
        """Whether this subscriber watches the event's resource ("*": any) and namespace."""
        return self.resource in ("*", event.resource) and self.namespace in (None, event.namespace)

    def close(self) -> None:
        """Wake the consumer with the end-of-feed marker (None)."""
        self.queue.put_nowait(None)


class Store:
    """Objects by key, the global revision, the event history and the subscribers."""

    def __init__(self, history_window: int | None = None) -> None:
        # A fresh cluster already has revisions behind it, compacted away: a watch from
        # an RV older than the fake's first one gets 410, as transcript 18's RV 2 does.
        self.rv = 100
        self.compacted_rv = 100
        self.history_window = history_window
        self._objects: dict[Key, JsonObj] = {}
        self._history: list[StoreEvent] = []
        self._subs: set[Subscription] = set()
        # Called with (resource, namespace, last state) when an object is removed: the
        # garbage collector's model (gc.py) listens.
        self.on_remove: list[Callable[[str, str, JsonObj], None]] = []
        # Container logs the kubelet recorded: (namespace, pod, container) -> text.
        self.logs: dict[tuple[str, str, str], str] = {}
        self._log_event = asyncio.Event()

    # ---- reads -------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> JsonObj | None:
        """A deep copy of the stored object, or None."""
        obj = self._objects.get((resource, namespace, name))
        return _clone(obj) if obj is not None else None

    def objects(self, resource: str, namespace: str | None) -> list[JsonObj]:
        """Deep copies of the objects, sorted by namespace then name (etcd key order)."""
        keys = sorted(k for k in self._objects if k[0] == resource and namespace in (None, k[1]))
        return [_clone(self._objects[k]) for k in keys]

    def count(self, resource: str, namespace: str | None, pred: Any) -> int:
        """How many stored objects satisfy ``pred`` (it must not change them): no copies,
        for a benchmark that asks often about a thousand pods."""
        return sum(
            1
            for (res, ns, _), obj in self._objects.items()
            if res == resource and namespace in (None, ns) and pred(obj)
        )

    def history_since(self, rv: int, resource: str, namespace: str | None) -> list[StoreEvent]:
        """Events after ``rv`` for that resource; caller checks compaction first."""
        return [
            e
            for e in self._history
            if e.rv > rv and e.resource == resource and namespace in (None, e.namespace)
        ]

    # ---- writes ------------------------------------------------------------------

    def next_rv(self) -> int:
        """Take the next revision (etcd bumps it once per write)."""
        self.rv += 1
        return self.rv

    def put(self, resource: str, namespace: str, name: str, obj: JsonObj) -> JsonObj:
        """Create or replace ``obj``: stamps a new resourceVersion and emits the event.
        Stores a copy and returns another: the caller's object stays the caller's."""
        return _clone(self.put_owned(resource, namespace, name, _clone(obj)))

    def put_owned(self, resource: str, namespace: str, name: str, obj: JsonObj) -> JsonObj:
        """``put`` for an object the caller made for it and never touches again (a
        copy it took with ``get``, say): stored as is, no copy in or out. Returns the
        stored object, to read only."""
        key = (resource, namespace, name)
        prev = self._objects.get(key)
        rv = self.next_rv()
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        self._objects[key] = obj
        kind = "ADDED" if prev is None else "MODIFIED"
        # A stored object is never changed in place (a write replaces it), so the event
        # shares it, as ``prev`` always has; watchers and the kubelet only read events.
        self._emit(StoreEvent(kind, rv, resource, namespace, obj, prev))
        return obj

    def remove(self, resource: str, namespace: str, name: str) -> JsonObj | None:
        """Delete the object now: a DELETED event carrying its last state and a new RV."""
        key = (resource, namespace, name)
        prev = self._objects.pop(key, None)
        if prev is None:
            return None
        rv = self.next_rv()
        gone = _clone(prev)
        gone["metadata"]["resourceVersion"] = str(rv)
        self._emit(StoreEvent("DELETED", rv, resource, namespace, _clone(gone), prev))
        for hook in self.on_remove:
            hook(resource, namespace, prev)
        return gone

    def _emit(self, event: StoreEvent) -> None:
        self._history.append(event)
        if self.history_window is not None and len(self._history) > self.history_window:
            drop = len(self._history) - self.history_window
            self.compacted_rv = max(self.compacted_rv, self._history[drop - 1].rv)
            del self._history[:drop]
        for sub in list(self._subs):
            if sub.wants(event):
                sub.queue.put_nowait(event)

    def compact(self, rv: int | None = None) -> int:
        """Forget history up to ``rv`` (default: everything so far); returns the point."""
        point = self.rv if rv is None else rv
        self.compacted_rv = max(self.compacted_rv, point)
        self._history = [e for e in self._history if e.rv > self.compacted_rv]
        return self.compacted_rv

    # ---- subscriptions -----------------------------------------------------------

    def subscribe(self, resource: str, namespace: str | None) -> Subscription:
        """Start receiving every later event for the resource."""
        sub = Subscription(resource, namespace)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub``; safe to call twice."""
        self._subs.discard(sub)

    def close_all(self) -> None:
        """End every subscription (server shutdown)."""
        for sub in list(self._subs):
            sub.close()
        self._subs.clear()

    # ---- container logs ----------------------------------------------------------

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Record container output and wake whoever waits on logs."""
        key = (namespace, pod, container)
        self.logs[key] = self.logs.get(key, "") + text
        self._log_event.set()
        self._log_event = asyncio.Event()

    def log_changed(self) -> asyncio.Event:
        """An event set at the next log append (take it before checking the logs)."""
        return self._log_event

    def keys(self) -> Iterator[Key]:
        """Every stored key (for tests that inspect the whole store)."""
        return iter(list(self._objects))
