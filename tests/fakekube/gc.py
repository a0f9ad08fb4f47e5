"""The garbage collector's model: an owner deleted takes its dependents with it.

As kube-controller-manager's garbage collector does for a ``Background`` (the default)
delete: the owner goes at once; then each object whose ``ownerReferences`` name the
owner's uid is deleted (a pod through the graceful-deletion rule, so a running pod
first gets its ``deletionTimestamp``), unless another owner it names still exists, in
which case only the reference to the gone owner is removed. ``Orphan`` removes the
reference from every dependent and deletes none. An object created with owners none of
which exists is deleted too (the real GC's "owner not found" verification). It runs
on the next turn of the event loop, after the request that deleted the owner has been
answered, as the real one runs after the apiserver answered.

Simplifications: owner references are indexed when an object is created (an update or
patch that changes them is not seen); ``Foreground`` is collected like ``Background``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import Registry

JsonObj = dict[str, Any]
Ref = tuple[str, str, str]  # (resource, namespace, name)


def _owner_uids(obj: JsonObj) -> set[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {str(r.get("uid")) for r in refs if isinstance(r, dict)}


class GarbageCollector:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._dependents: dict[str, set[Ref]] = {}
        # Every stored object by uid: "does the owner exist" without a scan (a
        # thousand-pod benchmark creates a pod a millisecond).
        self._objects: dict[str, Ref] = {}
        self._orphaning: set[str] = set()
        # What GC deleted, in order: (resource, namespace, name).
        self.deleted: list[Ref] = []
        registry.store.on_remove.append(self._removed)

    def created(self, resource: str, ns: str, obj: JsonObj) -> None:
        """Index a new object's owners; one whose owners are all missing is collected."""
        ref = (resource, ns, obj["metadata"]["name"])
        self._objects[str(obj["metadata"]["uid"])] = ref
        owners = _owner_uids(obj)
        if not owners:
            return
        for uid in owners:
            self._dependents.setdefault(uid, set()).add(ref)
        if not any(self._exists(ns, uid) for uid in owners):
            self._later(lambda: self._collect(ref, next(iter(owners))))

    def orphan(self, uid: str) -> None:
        """The next removal of ``uid`` orphans its dependents instead of deleting them."""
        self._orphaning.add(uid)

    def _removed(self, resource: str, ns: str, obj: JsonObj) -> None:
        uid = str(obj["metadata"].get("uid"))
        self._objects.pop(uid, None)
        refs = self._dependents.pop(uid, set())
        orphaning = uid in self._orphaning
        self._orphaning.discard(uid)
        for ref in sorted(refs):
            self._later(functools.partial(self._collect, ref, uid, orphan=orphaning))

    def _later(self, work: Callable[[], None]) -> None:
        try:
            asyncio.get_running_loop().call_soon(work)
        except RuntimeError:  # no loop: a registry driven synchronously
            work()

    def _exists(self, ns: str, uid: str) -> bool:
        ref = self._objects.get(uid)
        return ref is not None and ref[1] == ns

    def _collect(self, ref: Ref, gone_uid: str, *, orphan: bool = False) -> None:
        from .registry import RESOURCES

        resource, ns, name = ref
        current = self.registry.store.get(resource, ns, name)
        if current is None or gone_uid not in _owner_uids(current):
            return
        rt = next(r for r in RESOURCES.values() if r.resource == resource)
        others = {u for u in _owner_uids(current) - {gone_uid} if self._exists(ns, u)}
        if orphan or others:
            meta = current["metadata"]
            meta["ownerReferences"] = [
                r for r in meta["ownerReferences"] if str(r.get("uid")) != gone_uid
            ] or None
            if meta["ownerReferences"] is None:
                del meta["ownerReferences"]
            self.registry.store.put_owned(resource, ns, name, current)
            return
        self.deleted.append(ref)
        if current["metadata"].get("deletionTimestamp") is None:
            self.registry.delete(rt, ns, name, uid=current["metadata"]["uid"])
