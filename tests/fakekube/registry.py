"""Create/get/list/update/patch/delete with the apiserver's semantics, over the Store.

Both the HTTP handlers and the in-process kubelet go through here, so a status the
kubelet writes obeys the same rules (resourceVersion bump, watch event) as one a
client PATCHes over the wire — only the request counters tell them apart.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import pods
from .gc import GarbageCollector
from .objects import META_ORDER, later, managed_entry, ordered, stamp_new, validate_meta
from .patch import apply_patch
from .status import ApiError, already_exists, bad_request, conflict, not_found, status_body
from .store import Store, _clone

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    """A served resource: where it lives in the API and what its objects are called."""

    group: str
    version: str
    resource: str
    kind: str
    generation: bool  # whether objects carry metadata.generation
    unconditional_update: bool  # whether PUT without resourceVersion is allowed

    @property
    def api_version(self) -> str:
        """``v1`` for core, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version


PODS = ResourceType("", "v1", "pods", "Pod", generation=True, unconditional_update=True)
LEASES = ResourceType(
    "coordination.k8s.io", "v1", "leases", "Lease", generation=False, unconditional_update=False
)
CONFIGMAPS = ResourceType(
    "", "v1", "configmaps", "ConfigMap", generation=False, unconditional_update=True
)
RESOURCES = {(r.group, r.resource): r for r in (PODS, CONFIGMAPS, LEASES)}


def _finish(obj: JsonObj) -> JsonObj:
    obj["metadata"] = ordered(obj["metadata"], META_ORDER)
    return ordered(obj, ["kind", "apiVersion", "metadata", "spec", "status"])


class Registry:
    """The storage layer of the fake apiserver (the part below authn/authz/admission)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # When each pod was stored, to the microsecond (creationTimestamp has whole
        # seconds): benchmarks measure dispatch latency against it.
        self.created_at: dict[tuple[str, str], float] = {}
        self.gc = GarbageCollector(self)

    def _existing(self, rt: ResourceType, ns: str, name: str) -> JsonObj:
        obj = self.store.get(rt.resource, ns, name)
        if obj is None:
            raise not_found(rt.group, rt.resource, name)
        return obj

    def create(
        self,
        rt: ResourceType,
        ns: str,
        body: JsonObj,
        manager: str,
        admit: Callable[[JsonObj], None] | None = None,
    ) -> JsonObj:
        """POST: validate, admit, then store; 409 AlreadyExists when the name is taken.

        Order as the apiserver's: validation (422) before validating admission (403)
        before the storage conflict (409).
        """
        obj = _clone(body)
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        meta = stamp_new(obj.setdefault("metadata", {}), ns, rt.generation)
        body_ns = (body.get("metadata") or {}).get("namespace")
        if body_ns and body_ns != ns:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        validate_meta(rt.kind, meta)
        if rt is PODS:
            obj = pods.default_pod(obj)
        else:
            obj.pop("status", None)
        if admit is not None:
            admit(obj)
        if self.store.get(rt.resource, ns, meta["name"]) is not None:
            raise already_exists(rt.group, rt.resource, meta["name"])
        obj["metadata"]["managedFields"] = [managed_entry(manager, rt.api_version, body)]
        # ``obj`` is this call's own deep copy of the body: the store may keep it.
        stored = self.store.put_owned(rt.resource, ns, meta["name"], _finish(obj))
        if rt is PODS:
            self.created_at[(ns, meta["name"])] = time.time()
        self.gc.created(rt.resource, ns, stored)
        return _clone(stored)

    def get(self, rt: ResourceType, ns: str, name: str) -> JsonObj:
        """GET one object or 404."""
        return self._existing(rt, ns, name)

    def list(
        self, rt: ResourceType, ns: str | None, keep: Callable[[JsonObj], bool]
    ) -> tuple[list[JsonObj], int]:
        """Matching objects and the revision the list reflects."""
        return [o for o in self.store.objects(rt.resource, ns) if keep(o)], self.store.rv

    def _check_rv(self, rt: ResourceType, current: JsonObj, wanted: str | None, name: str) -> None:
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise conflict(rt.group, rt.resource, name)

    def update(
        self, rt: ResourceType, ns: str, name: str, body: JsonObj, manager: str, sub: str = ""
    ) -> JsonObj:
        """PUT with optimistic concurrency: a stale resourceVersion is 409 Conflict."""
        current = self._existing(rt, ns, name)
        meta = body.get("metadata") or {}
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name "
                f"on the URL ({name})"
            )
        wanted = meta.get("resourceVersion")
        if not wanted and not rt.unconditional_update:
            raise ApiError(
                status_body(
                    422,
                    "Invalid",
                    f'{rt.kind}.{rt.group} "{name}" is invalid: metadata.resourceVersion: '
                    "Invalid value: 0: must be specified for an update",
                    {"name": name, "group": rt.group, "kind": rt.kind},
                )
            )
        self._check_rv(rt, current, wanted, name)
        if sub == "status":
            new = copy.deepcopy(current)
            new["status"] = copy.deepcopy(body.get("status") or {})
        else:
            new = copy.deepcopy(body)
            new["kind"], new["apiVersion"] = rt.kind, rt.api_version
            keep = (
                "namespace",
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            )
            new_meta = new.setdefault("metadata", {})
            for key in keep:
                if key in current["metadata"]:
                    new_meta[key] = current["metadata"][key]
            validate_meta(rt.kind, new_meta)
            if rt is PODS:
                new["status"] = current.get("status", {})
        new["metadata"]["managedFields"] = [managed_entry(manager, rt.api_version, body, sub)]
        return self.store.put(rt.resource, ns, name, _finish(pods.order_status(new)))

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Any,
        content_type: str,
        manager: str,
        sub: str = "",
    ) -> JsonObj:
        """PATCH (merge, strategic-as-merge-with-keys, JSON patch) of object or status."""
        current = self._existing(rt, ns, name)
        patched = apply_patch(current, body, content_type)
        if isinstance(body, dict):
            self._check_rv(rt, current, (body.get("metadata") or {}).get("resourceVersion"), name)
        if sub == "status":
            new = copy.deepcopy(current)
            new["status"] = patched.get("status") or {}
        else:
            new = patched
            for key in ("uid", "namespace", "name", "creationTimestamp", "resourceVersion"):
                new["metadata"][key] = current["metadata"][key]
            if "status" in current:
                new["status"] = current["status"]
            validate_meta(rt.kind, new["metadata"])
        mf = list(current["metadata"].get("managedFields") or [])
        summary = body if isinstance(body, dict) else {}
        mf.append(managed_entry(manager, rt.api_version, summary, sub))
        new["metadata"]["managedFields"] = mf
        return self.store.put(rt.resource, ns, name, _finish(pods.order_status(new)))

    def delete(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        grace: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
    ) -> JsonObj:
        """DELETE: graceful for running bound pods, immediate otherwise (see pods.py);
        dependents go by ``propagation`` (gc.py)."""
        current = self._existing(rt, ns, name)
        meta = current["metadata"]
        if uid and uid != meta["uid"]:
            raise conflict(
                rt.group,
                rt.resource,
                name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {meta['uid']}",
            )
        if resource_version and resource_version != meta["resourceVersion"]:
            raise conflict(
                rt.group,
                rt.resource,
                name,
                f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
        if propagation == "Orphan":
            self.gc.orphan(meta["uid"])
        if rt is not PODS:
            self.store.remove(rt.resource, ns, name)
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                # ``group`` is omitted when empty (core), as the apiserver's omitempty does.
                "details": {
                    "name": name,
                    **({"group": rt.group} if rt.group else {}),
                    "kind": rt.resource,
                    "uid": meta["uid"],
                },
            }
        period = pods.effective_grace(current, grace)
        if meta.get("deletionTimestamp") is not None:
            if period >= int(meta.get("deletionGracePeriodSeconds", 0)):
                return current  # a longer or equal grace never extends a pending deletion
        else:
            meta["generation"] = int(meta.get("generation", 1)) + 1
        meta["deletionTimestamp"] = later(period)
        meta["deletionGracePeriodSeconds"] = period
        stored = self.store.put(rt.resource, ns, name, _finish(current))
        if period > 0:
            return stored
        gone = self.store.remove(rt.resource, ns, name)
        assert gone is not None
        return gone

    def bind(self, ns: str, name: str, node: str) -> None:
        """POST pods/binding: 409 when already bound or being deleted."""
        current = self._existing(PODS, ns, name)
        if current["spec"].get("nodeName"):
            raise conflict(
                "",
                "pods/binding",
                name,
                f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"',
            )
        if current["metadata"].get("deletionTimestamp"):
            raise conflict(
                "",
                "pods/binding",
                name,
                f"pod {name} is being deleted, cannot be assigned to a host",
            )
        self.store.put_owned("pods", ns, name, pods.bind(current, node))

    def mutate_status(
        self, ns: str, name: str, change: Callable[[JsonObj], None]
    ) -> JsonObj | None:
        """In-process status write (the kubelet's path); None when the pod is gone,
        else the stored pod, to read only."""
        current = self.store.get("pods", ns, name)
        if current is None:
            return None
        status = current.setdefault("status", {})
        change(status)
        # ``current`` is the copy ``get`` made for this call: the store may keep it.
        # The stored pod itself, to read only (the kubelet asks only whether it exists).
        return self.store.put_owned("pods", ns, name, pods.order_status(current))
