"""ConfigMaps through kubernetes_asyncio (create, get, list, watch, delete, with the
apiserver's Status bodies) and the garbage collector's model: deleting an owner deletes
its dependents, as kube-controller-manager's does."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fakekube import FakeApiServer

from .conftest import NS, error_body, pod_manifest


def _cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {"dag_id": name}}


def _owned(name: str, *owners: Any) -> dict[str, Any]:
    pod = pod_manifest(name)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid}
        for o in owners
    ]
    return pod


async def test_create_get_list_delete_with_the_apiservers_answers(v1: Any) -> None:
    made = await v1.create_namespaced_config_map(NS, _cm("a", {"leoflow.io/dag": "a"}))
    assert made.metadata.uid and made.metadata.creation_timestamp is not None
    assert made.metadata.generation is None  # ConfigMaps have none
    assert made.data == {"dag_id": "a"}
    await v1.create_namespaced_config_map(NS, _cm("b"))
    got = await v1.read_namespaced_config_map("a", NS)
    assert got.metadata.resource_version == made.metadata.resource_version
    listed = await v1.list_namespaced_config_map(NS, label_selector="leoflow.io/dag=a")
    assert [i.metadata.name for i in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) > int(made.metadata.resource_version)

    with pytest.raises(ApiException) as taken:
        await v1.create_namespaced_config_map(NS, _cm("a"))
    assert taken.value.status == 409
    assert error_body(taken) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "a" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "a", "kind": "configmaps"},
        "code": 409,
    }
    with pytest.raises(ApiException) as stale:
        await v1.delete_namespaced_config_map("a", NS, body={"preconditions": {"uid": "other"}})
    assert stale.value.status == 409 and error_body(stale)["reason"] == "Conflict"

    gone = await v1.delete_namespaced_config_map("a", NS, _preload_content=False)
    assert await gone.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": made.metadata.uid},
    }
    with pytest.raises(ApiException) as missing:
        await v1.read_namespaced_config_map("a", NS)
    assert error_body(missing) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "a" not found',
        "reason": "NotFound",
        "details": {"name": "a", "kind": "configmaps"},
        "code": 404,
    }


async def test_watch_sees_configmaps_added_and_deleted(v1: Any) -> None:
    start = (await v1.list_namespaced_config_map(NS)).metadata.resource_version
    await v1.create_namespaced_config_map(NS, _cm("w"))
    await v1.delete_namespaced_config_map("w", NS)
    seen = []
    async with watch.Watch().stream(
        v1.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=1
    ) as stream:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                break
    assert seen == [("ADDED", "w"), ("DELETED", "w")]


async def test_deleting_the_owner_deletes_its_dependents(server: FakeApiServer, v1: Any) -> None:
    owner = await v1.create_namespaced_config_map(NS, _cm("anchor"))
    other = await v1.create_namespaced_config_map(NS, _cm("other"))
    await v1.create_namespaced_pod(NS, _owned("p-pending", owner))
    await v1.create_namespaced_pod(NS, _owned("p-running", owner))
    await v1.create_namespaced_pod(NS, _owned("p-shared", owner, other))
    await v1.create_namespaced_pod(NS, _owned("p-other", other))
    await v1.create_namespaced_pod(NS, pod_manifest("p-free"))
    server.registry.bind(NS, "p-running", "node-1")
    server.registry.mutate_status(NS, "p-running", lambda s: s.update(phase="Running"))

    await v1.delete_namespaced_config_map("anchor", NS)
    await server.wait_until(lambda: "p-pending" not in server.pod_names(NS))
    running = await server.wait_for_pod(
        NS, "p-running", lambda p: p is not None and "deletionTimestamp" in p["metadata"]
    )
    # A running pod is deleted gracefully, as a user's delete would: its grace period.
    assert running is not None and running["metadata"]["deletionGracePeriodSeconds"] == 30
    shared = server.pod(NS, "p-shared")
    assert shared is not None and "deletionTimestamp" not in shared["metadata"]
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]
    assert {"p-other", "p-free"} <= set(server.pod_names(NS))
    assert sorted(name for _, _, name in server.registry.gc.deleted) == ["p-pending", "p-running"]


async def test_orphan_propagation_keeps_the_dependents(server: FakeApiServer, v1: Any) -> None:
    owner = await v1.create_namespaced_config_map(NS, _cm("anchor"))
    await v1.create_namespaced_pod(NS, _owned("p", owner))
    await v1.delete_namespaced_config_map("anchor", NS, propagation_policy="Orphan")
    await server.wait_until(
        lambda: "ownerReferences" not in (server.pod(NS, "p") or {"x": 1})["metadata"]
    )
    assert server.registry.gc.deleted == []


async def test_a_pod_whose_owner_does_not_exist_is_collected(
    server: FakeApiServer, v1: Any
) -> None:
    owner = await v1.create_namespaced_config_map(NS, _cm("anchor"))
    await v1.delete_namespaced_config_map("anchor", NS)
    created = await v1.create_namespaced_pod(NS, _owned("late", owner))  # a stale uid
    assert created.metadata.name == "late"  # the create itself succeeds, as on a cluster
    await server.wait_until(lambda: "late" not in server.pod_names(NS))
    assert server.registry.gc.deleted == [("pods", NS, "late")]


async def test_configmaps_are_authorized_like_any_resource() -> None:
    async with (
        FakeApiServer(rbac=[("create", "", "configmaps", NS)]) as srv,
        srv.api_client() as api,
    ):
        v1: Any = client.CoreV1Api(api)
        await v1.create_namespaced_config_map(NS, _cm("x"))
        with pytest.raises(ApiException) as denied:
            await v1.list_namespaced_config_map(NS)
    assert denied.value.status == 403
    assert error_body(denied)["message"].startswith(
        'configmaps is forbidden: User "system:serviceaccount:leoflow-system:leoflow" cannot '
        'list resource "configmaps" in API group "" in the namespace "cap"'
    )
