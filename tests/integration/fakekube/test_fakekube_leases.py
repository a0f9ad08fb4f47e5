"""Leases through CoordinationV1Api: the optimistic concurrency leader election needs."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from .conftest import NS, error_body


def lease(holder: str, rv: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "leoflow-scheduler"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 0},
    }


async def test_create_get_update_with_current_rv(coord: Any) -> None:
    created = await coord.create_namespaced_lease(NS, lease("sched-a"))
    assert created.metadata.uid and created.spec.holder_identity == "sched-a"
    got = await coord.read_namespaced_lease("leoflow-scheduler", NS)
    assert got.metadata.resource_version == created.metadata.resource_version
    updated = await coord.replace_namespaced_lease(
        "leoflow-scheduler", NS, lease("sched-a", created.metadata.resource_version)
    )
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    assert updated.metadata.uid == created.metadata.uid


async def test_stale_rv_is_409_conflict(coord: Any) -> None:
    created = await coord.create_namespaced_lease(NS, lease("sched-a"))
    stale = created.metadata.resource_version
    await coord.replace_namespaced_lease("leoflow-scheduler", NS, lease("sched-a", stale))
    with pytest.raises(ApiException) as err:
        await coord.replace_namespaced_lease("leoflow-scheduler", NS, lease("sched-b", stale))
    assert err.value.status == 409
    body = error_body(err)
    assert body["reason"] == "Conflict"
    assert body["details"] == {
        "name": "leoflow-scheduler",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }
    current = await coord.read_namespaced_lease("leoflow-scheduler", NS)
    assert current.spec.holder_identity == "sched-a"


async def test_missing_lease_is_404_and_second_create_409(coord: Any) -> None:
    with pytest.raises(ApiException) as err:
        await coord.read_namespaced_lease("leoflow-scheduler", NS)
    assert err.value.status == 404
    assert error_body(err)["message"] == (
        'leases.coordination.k8s.io "leoflow-scheduler" not found'
    )
    await coord.create_namespaced_lease(NS, lease("sched-a"))
    with pytest.raises(ApiException) as err:
        await coord.create_namespaced_lease(NS, lease("sched-b"))
    assert err.value.status == 409
    assert error_body(err)["reason"] == "AlreadyExists"


async def test_update_without_rv_is_refused(coord: Any) -> None:
    await coord.create_namespaced_lease(NS, lease("sched-a"))
    with pytest.raises(ApiException) as err:
        await coord.replace_namespaced_lease("leoflow-scheduler", NS, lease("sched-b"))
    assert err.value.status == 422
