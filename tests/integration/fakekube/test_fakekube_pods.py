"""Pods through kubernetes_asyncio: create, conflicts, get, list with selectors, delete."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fakekube import FakeApiServer

from .conftest import NS, error_body, pod_manifest


async def test_create_fills_server_fields_and_defaults(v1: Any) -> None:
    pod = await v1.create_namespaced_pod(NS, pod_manifest("p1"))
    assert pod.metadata.uid
    assert int(pod.metadata.resource_version) > 0
    assert pod.metadata.creation_timestamp is not None
    assert pod.metadata.generation == 1
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "BestEffort"
    assert pod.spec.termination_grace_period_seconds == 30
    assert pod.spec.service_account_name == "default"
    assert pod.spec.containers[0].termination_message_path == "/dev/termination-log"
    assert [t.key for t in pod.spec.tolerations] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]


async def test_resource_versions_are_monotonic_across_objects(v1: Any) -> None:
    rvs = [
        int((await v1.create_namespaced_pod(NS, pod_manifest(f"p{i}"))).metadata.resource_version)
        for i in range(3)
    ]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


async def test_create_twice_is_409_already_exists(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("twice"))
    with pytest.raises(ApiException) as err:
        await v1.create_namespaced_pod(NS, pod_manifest("twice"))
    assert err.value.status == 409
    body = error_body(err)
    assert body["reason"] == "AlreadyExists"
    assert body["details"] == {"name": "twice", "kind": "pods"}


async def test_get_missing_is_404(v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        await v1.read_namespaced_pod("nope", NS)
    assert err.value.status == 404
    assert error_body(err)["message"] == 'pods "nope" not found'


async def test_qos_class_follows_resources(v1: Any) -> None:
    pod = pod_manifest("guaranteed")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    created = await v1.create_namespaced_pod(NS, pod)
    assert created.status.qos_class == "Guaranteed"
    assert created.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    burst = pod_manifest("burstable")
    burst["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert (await v1.create_namespaced_pod(NS, burst)).status.qos_class == "Burstable"


async def test_label_longer_than_63_is_422(v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        await v1.create_namespaced_pod(NS, pod_manifest("long", labels={"dag": "x" * 64}))
    assert err.value.status == 422
    assert error_body(err)["reason"] == "Invalid"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=a", ["a1", "a2"]),
        ("team==a", ["a1", "a2"]),
        ("team!=a", ["b1", "none"]),
        ("team in (a,b)", ["a1", "a2", "b1"]),
        ("team notin (a)", ["b1", "none"]),
        ("team", ["a1", "a2", "b1"]),
        ("!team", ["none"]),
        ("team=a,tier=gold", ["a2"]),
        ("team in (a, b),!tier", ["a1", "b1"]),
    ],
)
async def test_list_label_selectors(v1: Any, selector: str, expected: list[str]) -> None:
    for name, labels in {
        "a1": {"team": "a"},
        "a2": {"team": "a", "tier": "gold"},
        "b1": {"team": "b"},
        "none": {},
    }.items():
        await v1.create_namespaced_pod(NS, pod_manifest(name, labels=labels))
    listed = await v1.list_namespaced_pod(NS, label_selector=selector)
    assert sorted(p.metadata.name for p in listed.items) == expected


async def test_list_field_selector_and_list_resource_version(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("one"))
    last = await v1.create_namespaced_pod(NS, pod_manifest("two"))
    listed = await v1.list_namespaced_pod(NS, field_selector="metadata.name=two")
    assert [p.metadata.name for p in listed.items] == ["two"]
    assert listed.metadata.resource_version == last.metadata.resource_version
    others = await v1.list_namespaced_pod(NS, field_selector="metadata.name!=two")
    assert [p.metadata.name for p in others.items] == ["one"]


async def test_bad_selector_is_400(v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        await v1.list_namespaced_pod(NS, label_selector="a in (b")
    assert err.value.status == 400


async def test_list_pagination_with_limit_and_continue(v1: Any) -> None:
    for i in range(5):
        await v1.create_namespaced_pod(NS, pod_manifest(f"page-{i}"))
    first = await v1.list_namespaced_pod(NS, limit=2)
    assert [p.metadata.name for p in first.items] == ["page-0", "page-1"]
    assert first.metadata.remaining_item_count == 3
    rest = await v1.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["page-2", "page-3", "page-4"]
    assert rest.metadata._continue is None


async def test_delete_unbound_pod_is_immediate(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("unbound"))
    gone = await v1.delete_namespaced_pod("unbound", NS)
    assert gone.metadata.deletion_grace_period_seconds == 0
    assert server.pod(NS, "unbound") is None


async def test_delete_running_bound_pod_is_graceful_then_grace_zero(
    v1: Any, server: FakeApiServer
) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("runner"))
    await v1.create_namespaced_pod_binding(
        "runner",
        NS,
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "runner"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
        },
        _preload_content=False,
    )
    await v1.patch_namespaced_pod_status("runner", NS, {"status": {"phase": "Running"}})
    first = await v1.delete_namespaced_pod("runner", NS)
    assert first.metadata.deletion_grace_period_seconds == 30
    assert first.metadata.generation == 2
    still = await v1.read_namespaced_pod("runner", NS)
    assert still.metadata.deletion_timestamp is not None
    assert still.status.phase == "Running"
    # a longer grace never extends a pending deletion
    again = await v1.delete_namespaced_pod("runner", NS, grace_period_seconds=60)
    assert again.metadata.deletion_grace_period_seconds == 30
    forced = await v1.delete_namespaced_pod("runner", NS, grace_period_seconds=0)
    assert forced.metadata.deletion_grace_period_seconds == 0
    assert server.pod(NS, "runner") is None


async def test_binding_twice_is_409(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("bound"))
    body = {"metadata": {"name": "bound"}, "target": {"kind": "Node", "name": "node-a"}}
    # _preload_content=False: the client cannot deserialise the Status answer into a
    # V1Binding (it insists on ``target``), a known client quirk; and with it the client
    # does not raise on an error status, so the test reads the status itself.
    first = await v1.create_namespaced_pod_binding("bound", NS, body, _preload_content=False)
    assert first.status == 201
    assert json.loads(await first.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = await v1.read_namespaced_pod("bound", NS)
    assert pod.spec.node_name == "node-a"
    assert [c.type for c in pod.status.conditions] == ["PodScheduled"]
    second = await v1.create_namespaced_pod_binding("bound", NS, body, _preload_content=False)
    assert second.status == 409
    assert json.loads(await second.read())["reason"] == "Conflict"


async def test_status_patch_merges_container_statuses_by_name(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("st"))
    running = {
        "name": "task",
        "image": "x",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
    }
    await v1.patch_namespaced_pod_status(
        "st", NS, {"status": {"phase": "Running", "containerStatuses": [running]}}
    )
    done = {"name": "task", "ready": False}
    patched = await v1.patch_namespaced_pod_status(
        "st", NS, {"status": {"containerStatuses": [done]}}
    )
    [cs] = patched.status.container_statuses
    assert cs.state.running is not None and cs.ready is False
    assert patched.status.phase == "Running"


async def test_delete_with_wrong_uid_precondition_is_409(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("pre"))
    with pytest.raises(ApiException) as err:
        await v1.delete_namespaced_pod("pre", NS, body={"preconditions": {"uid": "other"}})
    assert err.value.status == 409
