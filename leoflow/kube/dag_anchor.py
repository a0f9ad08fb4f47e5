"""Each DAG's GC anchor: one ConfigMap per DAG in the task namespace (ADR 0053).

Every task pod of a DAG carries an ``ownerReference`` to its DAG's anchor, so deleting
the anchor is deleting the DAG's pods: the cluster's garbage collector removes them in
the background, whichever scheduler replica (or none) is alive. The anchor is made on
a DAG's first launch in this scheduler's life and its uid kept, so it costs one create
(a 409 and a get when it exists already) per DAG per scheduler life, not per pod. The
orphan sweep lists the anchors once at start-up: those of DAGs that no longer exist
are deleted, the others prime the uid cache (no create after a restart).

``blockOwnerDeletion`` is false: it only matters to a *foreground* delete of the anchor,
which Leoflow never asks for (it deletes in the background, so the anchor goes at once
and the DAG is gone from the cluster's view while its pods terminate with their own
grace), and setting it true would need ``update`` on ``configmaps/finalizers`` under
the OwnerReferencesPermissionEnforcement admission plugin, a grant the Role does not
carry.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping

from leoflow.aio.waits import wait_set
from leoflow.domain.execution import LaunchError
from leoflow.kube.client import KubeClient
from leoflow.kube.errors import AlreadyExists, KubeError
from leoflow.kube.objects import JsonObj
from leoflow.kube.pod import LABEL_DAG, MANAGED_BY, MANAGED_BY_VALUE, SELECTOR, label_value
from leoflow.kube.podcache import Backoff

log = logging.getLogger("leoflow.kube.dag_anchor")

ANCHOR_PREFIX = "leoflow-dag-"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT = "dag-anchor"
ANCHOR_SELECTOR = f"{SELECTOR},{LABEL_COMPONENT}={COMPONENT}"
DATA_DAG = "dag_id"
DATA_SHAPES = "shapes"
# A create that meets an anchor being deleted, or one gone between the 409 and the
# get, tries again this many times before it counts as no answer.
_RACES = 3


def anchor_name(dag_id: str) -> str:
    """``leoflow-dag-<hash>``: a DAG id may be any text, a ConfigMap name may not."""
    return ANCHOR_PREFIX + hashlib.sha256(dag_id.encode()).hexdigest()[:16]


def anchor_manifest(dag_id: str, namespace: str, shapes: Iterable[str] = ()) -> JsonObj:
    """The anchor ConfigMap of ``dag_id``; ``shapes`` are the pod-shape hashes its
    warm pods use (sorted, one a line), none for a DAG of ephemeral pods."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": anchor_name(dag_id),
            "namespace": namespace,
            "labels": {
                MANAGED_BY: MANAGED_BY_VALUE,
                LABEL_COMPONENT: COMPONENT,
                LABEL_DAG: label_value(dag_id),
            },
        },
        "data": {DATA_DAG: dag_id, DATA_SHAPES: "\n".join(sorted(set(shapes)))},
    }


def owner_reference(name: str, uid: str) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": name,
        "uid": uid,
        "blockOwnerDeletion": False,
    }


def set_owner(obj: JsonObj, reference: JsonObj) -> None:
    """Make ``reference`` an owner of ``obj`` (a pod manifest), replacing none."""
    obj.setdefault("metadata", {}).setdefault("ownerReferences", []).append(reference)


class BeingDeleted(KubeError):
    """The anchor has a deletionTimestamp: wait for it to go, then make a new one."""


class DagAnchors:
    """The anchors this scheduler made or found, by DAG id: uid cache, creates, deletes."""

    def __init__(
        self,
        client: Callable[[], KubeClient | None],
        namespace: str,
        clock: Callable[[], float] = time.time,
        busy: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self._clock = clock
        # The DAGs with tries in flight: never retired under them (a DAG learned after
        # the last ``keep_only``, or one whose runs the scheduler has not recovered yet).
        self._busy = busy
        self._uids: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._keep: dict[str, float | None] | None = None
        self._wanted = asyncio.Event()
        self._swept = False
        # The DAGs whose anchor exists as far as this scheduler knows: made or found,
        # and not yet deleted (a forgotten uid stays here, a delete without answer too).
        self._seen: set[str] = set()

    def known(self) -> set[str]:
        """The DAGs whose anchor this scheduler made or found and has not deleted."""
        return set(self._seen)

    def forget(self, dag_id: str) -> None:
        """The cached uid may be stale (a pod of the DAG vanished): ask again next time."""
        self._uids.pop(dag_id, None)

    async def ensure(self, dag_id: str, shapes: Iterable[str] = ()) -> JsonObj:
        """The owner reference for ``dag_id``'s pods, making the anchor if needed.

        ``shapes`` are written into an anchor this call makes; an anchor that exists
        keeps what it has (the Role grants no update: an anchor is made or deleted).

        Raises ``LaunchError`` when the apiserver refuses the anchor (RBAC, quota,
        an admission webhook) and ``KubeError`` when it gives no useful answer (the
        caller rides that out as it does for the pod itself)."""
        name = anchor_name(dag_id)
        uid = self._uids.get(dag_id)
        if uid is not None:
            return owner_reference(name, uid)
        lock = self._locks.setdefault(dag_id, asyncio.Lock())
        async with lock:  # concurrent launches of one DAG: one create between them
            uid = self._uids.get(dag_id)
            if uid is None:
                try:
                    uid = await self._create_or_get(dag_id, shapes)
                except KubeError as exc:
                    if exc.retryable:
                        raise
                    raise LaunchError(
                        f"the apiserver refused ConfigMap {name} in namespace "
                        f"{self.namespace!r}, the GC anchor of DAG {dag_id!r} that its pods "
                        f"are owned by: {exc}. The scheduler's Role needs configmaps "
                        f"create and get there (upgrade the chart), and a ResourceQuota must "
                        f"leave room for one ConfigMap per DAG"
                    ) from exc
                self._uids[dag_id] = uid
                self._seen.add(dag_id)
            self._locks.pop(dag_id, None)
        return owner_reference(name, uid)

    async def _create_or_get(self, dag_id: str, shapes: Iterable[str]) -> str:
        client = self._client()
        assert client is not None, "start() first"
        body = anchor_manifest(dag_id, self.namespace, shapes)
        name = body["metadata"]["name"]
        for _ in range(_RACES):
            try:
                made = await client.create_configmap(body)
                return str(made["metadata"]["uid"])
            except AlreadyExists:
                found = await client.get_configmap(name)
            if found is None:
                continue  # deleted between the 409 and the get: make it again
            meta = found.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                # Owned by an anchor on its way out, a new pod would go with it.
                raise BeingDeleted(503, "BeingDeleted", f"ConfigMap {name} is being deleted")
            return str(meta["uid"])
        raise KubeError(503, "Conflict", f"ConfigMap {name} kept changing while it was made")

    async def delete(self, dag_id: str) -> bool | None:
        """Delete ``dag_id``'s anchor (its pods follow): True deleted, False there was
        none, None no useful answer (try again later)."""
        self._uids.pop(dag_id, None)
        client = self._client()
        if client is None:
            return None
        try:
            return await client.delete_configmap(anchor_name(dag_id))
        except KubeError as exc:
            log.warning("deleting the GC anchor of DAG %r failed: %s", dag_id, exc)
            return None

    async def sweep(self, live: Collection[str]) -> list[str]:
        """One LIST of the anchors: those of DAGs not in ``live`` are deleted (their pods
        follow), the others' uids are kept. Returns the DAGs whose anchors were deleted."""
        client = self._client()
        assert client is not None, "start() first"
        found = await client.list_configmaps(ANCHOR_SELECTOR)
        orphans: list[tuple[str, JsonObj]] = []
        for item in found.get("items") or []:
            meta = item.get("metadata") or {}
            dag_id = str((item.get("data") or {}).get(DATA_DAG, ""))
            if meta.get("name") != anchor_name(dag_id) or meta.get("deletionTimestamp"):
                continue  # not an anchor this code made, or on its way out
            if dag_id in live or dag_id in self._busy():
                self._uids.setdefault(dag_id, str(meta["uid"]))
                self._seen.add(dag_id)
            else:
                orphans.append((dag_id, meta))
        deleted: list[str] = []
        for dag_id, meta in orphans:
            try:
                await client.delete_configmap(meta["name"], uid=str(meta["uid"]))
            except KubeError as exc:
                if exc.status != 409:  # 409: a new anchor by now, not an orphan
                    log.warning("deleting the orphan GC anchor of DAG %r: %s", dag_id, exc)
                    self._seen.add(dag_id)
                continue
            deleted.append(dag_id)
        if deleted:
            log.info("deleted the GC anchors of %d DAGs that no longer exist", len(deleted))
        return deleted

    # ---- retiring the anchors of DAGs that are gone ------------------------------------

    def keep_only(self, keep: Mapping[str, float | None]) -> None:
        """Every DAG that exists, kept until a time (None: for good); every other DAG
        is gone: ``run`` deletes their anchors (the first time after start-up it sweeps
        with one LIST; later it deletes only anchors this scheduler made or found).
        Returns at once: the scheduler never waits on it."""
        self._keep = dict(keep)
        self._wanted.set()

    async def run(self, backoff: Backoff) -> None:
        """Delete what ``keep_only`` asked for when it is due, again after a failure."""
        while True:
            self._wanted.clear()
            keep = self._keep
            wait: float | None = None
            if keep is not None:
                now = self._clock()
                live = frozenset(d for d, until in keep.items() if until is None or until > now)
                if await self._retire(live):
                    backoff.reset()
                else:
                    wait = backoff.next()
                later = [
                    until - now for until in keep.values() if until is not None and until > now
                ]
                if later:
                    wait = min(later) if wait is None else min(wait, min(later))
            await wait_set(self._wanted, wait)

    async def _retire(self, live: frozenset[str]) -> bool:
        try:
            if not self._swept:
                await self.sweep(live)
                self._swept = True
        except KubeError as exc:
            log.warning("listing the DAGs' GC anchors failed: %s; trying again", exc)
            return False
        busy = set(self._busy())
        done = not (self.known() - live) & busy  # a busy one: again once its tries end
        for dag_id in sorted(self.known() - live - busy):
            if await self.delete(dag_id) is None:
                done = False
            else:
                self._seen.discard(dag_id)
        return done
