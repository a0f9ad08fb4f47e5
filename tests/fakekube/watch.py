"""The watch protocol: which events a watcher gets, in what shape, and when it ends.

Semantics copied from the apiserver's watch cache (cacheWatcher.convertToWatchEvent):
for a watch with a label or field selector, an object that *starts* matching arrives
as ADDED, one that *stops* matching arrives as DELETED carrying its previous content
with the new resourceVersion, so a cache keyed by selector stays exact.

Start points: no ``resourceVersion`` or ``"0"`` → synthetic ADDED for every current
object, then live events; ``resourceVersion=N`` → every event after N replayed from
history (08), or, if N is older than the compaction point, a single ERROR event
carrying a 410 ``Expired`` Status in an HTTP 200 stream (18), then end of stream;
``sendInitialEvents=true`` → ADDED for the current state, then a BOOKMARK annotated
``k8s.io/initial-events-end`` (07). BOOKMARKs carry only ``metadata.resourceVersion``
(06) and are sent every ``bookmark_interval`` seconds when ``allowWatchBookmarks``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .registry import ResourceType
from .status import expired
from .store import Store, StoreEvent, Subscription

JsonObj = dict[str, Any]
Keep = Callable[[JsonObj], bool]


def bookmark_object(rt: ResourceType, rv: int, initial_end: bool = False) -> JsonObj:
    """An empty object of the watched kind with only the resourceVersion (transcript 06)."""
    meta: JsonObj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj: JsonObj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
    if rt.kind == "Pod":
        obj["spec"] = {"containers": None}
        obj["status"] = {}
    else:
        obj["spec"] = {}
    return obj


def convert(event: StoreEvent, keep: Keep) -> tuple[str, JsonObj] | None:
    """The event this watcher sees for a store event, or None if it sees nothing."""
    cur_passes = event.type != "DELETED" and keep(event.obj)
    old_passes = event.prev is not None and keep(event.prev)
    if event.type == "DELETED":
        return ("DELETED", event.obj) if old_passes else None
    if cur_passes and not old_passes:
        return "ADDED", event.obj
    if cur_passes and old_passes:
        return "MODIFIED", event.obj
    if old_passes:
        assert event.prev is not None
        gone = json.loads(json.dumps(event.prev))
        gone["metadata"]["resourceVersion"] = str(event.rv)
        return "DELETED", gone
    return None


def encode(kind: str, obj: JsonObj) -> bytes:
    """One watch line as the apiserver writes it (compact JSON, newline-terminated)."""
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


@dataclass
class WatchRequest:
    """A parsed watch: what to watch, from where, and for how long."""

    rt: ResourceType
    namespace: str | None
    keep: Keep
    resource_version: str
    send_initial_events: bool
    bookmarks: bool
    timeout: float | None


@dataclass(eq=False)
class OpenWatch:
    """A watch being served; the server keeps these to count and to drop them."""

    sub: Subscription
    abort: Callable[[], None]
    dropped: bool = False
    silent: bool = False


def start(store: Store, req: WatchRequest) -> tuple[list[bytes], Subscription | None]:
    """Compute the opening lines and subscribe, in one step with no await in between.

    Returns the lines to send first and the subscription for live events (None when
    the watch ends after those lines: the 410 case).
    """
    lines: list[bytes] = []
    rv = req.resource_version
    resource, ns = req.rt.resource, req.namespace
    if rv not in ("", "0") and not req.send_initial_events:
        start_rv = int(rv)
        if start_rv < store.compacted_rv:
            status = expired(f"too old resource version: {start_rv} ({store.compacted_rv})")
            return [encode("ERROR", status)], None
        for event in store.history_since(start_rv, resource, ns):
            seen = convert(event, req.keep)
            if seen is not None:
                lines.append(encode(*seen))
    else:
        for obj in store.objects(resource, ns):
            if req.keep(obj):
                lines.append(encode("ADDED", obj))
        if req.send_initial_events:
            lines.append(encode("BOOKMARK", bookmark_object(req.rt, store.rv, initial_end=True)))
    return lines, store.subscribe(resource, ns)


async def next_lines(
    store: Store, req: WatchRequest, sub: Subscription, wait: float | None
) -> list[bytes] | None:
    """Wait up to ``wait`` seconds for events; [] on a quiet period, None when stopped."""
    try:
        async with asyncio.timeout(wait):
            event = await sub.queue.get()
    except TimeoutError:
        return [encode("BOOKMARK", bookmark_object(req.rt, store.rv))] if req.bookmarks else []
    if event is None:
        return None
    lines: list[bytes] = []
    while True:
        seen = convert(event, req.keep)
        if seen is not None:
            lines.append(encode(*seen))
        if sub.queue.empty():
            return lines
        nxt = sub.queue.get_nowait()
        if nxt is None:
            sub.queue.put_nowait(None)
            return lines
        event = nxt
