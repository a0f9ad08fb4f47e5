"""Authentication (401), RBAC emulation (403) and PodSecurity ``restricted`` (403)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from leoflow.kube.calls import CALLS
from tests.fakekube import FakeApiServer

from .conftest import HARDENED_POD, NS, error_body, pod_manifest

PLAIN_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "plain"},
    "spec": {"containers": [{"name": "c", "image": "x"}]},
}


async def test_wrong_token_is_401(server: FakeApiServer) -> None:
    async with server.api_client(token="wrong") as api:
        with pytest.raises(ApiException) as err:
            await client.CoreV1Api(api).list_namespaced_pod(NS)
    assert err.value.status == 401
    assert error_body(err) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


async def test_kubeconfig_points_at_server(server: FakeApiServer, tmp_path: Any) -> None:
    from kubernetes_asyncio import config

    path = server.kubeconfig(tmp_path / "kubeconfig")
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        listed = await client.CoreV1Api(api).list_namespaced_pod(NS)
    assert listed.items == []


async def test_psa_restricted_message_lists_each_violation(v1: Any) -> None:
    with pytest.raises(ApiException) as err:
        await v1.create_namespaced_pod(NS, PLAIN_POD)
    assert err.value.status == 403
    body = error_body(err)
    assert body["message"] == (
        'pods "plain" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "c" must set '
        "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )
    assert body["details"] == {"name": "plain", "kind": "pods"}


async def test_psa_baseline_and_restricted_rules(v1: Any) -> None:
    pod = copy.deepcopy(HARDENED_POD)
    pod["metadata"]["name"] = "naughty"
    spec = pod["spec"]
    spec["hostNetwork"] = True
    spec["volumes"] = [{"name": "host", "hostPath": {"path": "/"}}, {"name": "tmp", "emptyDir": {}}]
    spec["securityContext"]["runAsUser"] = 0
    container = spec["containers"][0]
    container["securityContext"]["privileged"] = True
    container["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN", "NET_BIND_SERVICE"]
    container["ports"] = [{"containerPort": 80, "hostPort": 80}]
    with pytest.raises(ApiException) as err:
        await v1.create_namespaced_pod(NS, pod)
    message = error_body(err)["message"]
    reasons = [
        "host namespaces (hostNetwork)",
        'hostPath volumes (volume "host")',
        'hostPort (container "task" uses hostPort 80)',
        'privileged (container "task" must not set securityContext.privileged=true)',
        'unrestricted capabilities (container "task" must not include "SYS_ADMIN" in '
        "securityContext.capabilities.add)",
        'restricted volume types (volumes ["host"] have restricted types)',
        "runAsUser=0 (pod must not set runAsUser=0)",
    ]
    positions = [message.index(r) for r in reasons]
    assert positions == sorted(positions)  # the real evaluator's order


async def test_psa_allows_the_hardened_pod_and_unrestricted_namespaces(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("fine"))
    created = await v1.create_namespaced_pod("elsewhere", PLAIN_POD)
    assert created.metadata.namespace == "elsewhere"


async def test_rbac_forbidden_message_as_the_apiserver_words_it() -> None:
    limited = FakeApiServer(rbac=[], user="system:serviceaccount:cap:limited")
    async with limited as srv, srv.api_client() as api:
        with pytest.raises(ApiException) as err:
            await client.CoreV1Api(api).list_node()
    assert err.value.status == 403
    assert error_body(err) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes is forbidden: User "system:serviceaccount:cap:limited" cannot list '
        'resource "nodes" in API group "" at the cluster scope',
        "reason": "Forbidden",
        "details": {"kind": "nodes"},
        "code": 403,
    }


async def test_rbac_grants_per_verb_resource_and_namespace() -> None:
    async with FakeApiServer(rbac=[("list", "", "pods", NS)]) as srv, srv.api_client() as api:
        core = client.CoreV1Api(api)
        assert (await core.list_namespaced_pod(NS)).items == []
        with pytest.raises(ApiException) as other_ns:
            await core.list_namespaced_pod("other")
        with pytest.raises(ApiException) as log:
            await core.read_namespaced_pod_log("x", NS)
        srv.allow("get", "", "pods/log", NS)
        with pytest.raises(ApiException) as missing:
            await core.read_namespaced_pod_log("x", NS)
    assert other_ns.value.status == 403
    assert log.value.status == 403
    assert error_body(log)["message"] == (
        'pods "x" is forbidden: User "system:serviceaccount:leoflow-system:leoflow" cannot get '
        'resource "pods/log" in API group "" in the namespace "cap"'
    )
    assert missing.value.status == 404  # granted now: reaches the handler


async def test_the_call_table_is_recorded_as_rbac_names_it(server: FakeApiServer) -> None:
    """Drive each call of leoflow/kube/calls.py; the server records the same tuples."""
    async with server.api_client() as api:
        core: Any = client.CoreV1Api(api)
        coord: Any = client.CoordinationV1Api(api)
        lease: dict[str, Any] = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}
        await core.create_namespaced_pod(NS, pod_manifest("t"))
        await core.list_namespaced_pod(NS)
        await core.list_namespaced_pod(NS, watch=True, timeout_seconds=1, _preload_content=False)
        with pytest.raises(ApiException):
            await core.read_namespaced_pod_log("t", NS)
        await core.delete_namespaced_pod("t", NS)
        await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
        await core.read_namespaced_config_map("a", NS)
        await core.list_namespaced_config_map(NS)
        await core.delete_namespaced_config_map("a", NS)
        created = await coord.create_namespaced_lease("rel", lease)
        lease["metadata"]["resourceVersion"] = created.metadata.resource_version
        await coord.read_namespaced_lease("l", "rel")
        await coord.replace_namespaced_lease("l", "rel", lease)
    driven = {
        ("create", "", "pods", NS),
        ("list", "", "pods", NS),
        ("watch", "", "pods", NS),
        ("get", "", "pods/log", NS),
        ("delete", "", "pods", NS),
        ("create", "", "configmaps", NS),
        ("get", "", "configmaps", NS),
        ("list", "", "configmaps", NS),
        ("delete", "", "configmaps", NS),
        ("create", "coordination.k8s.io", "leases", "rel"),
        ("get", "coordination.k8s.io", "leases", "rel"),
        ("update", "coordination.k8s.io", "leases", "rel"),
    }
    assert server.seen == driven
    scope_ns = {"task": NS, "release": "rel"}
    table = {(c.verb, c.group, c.resource, scope_ns[c.scope]) for c in CALLS}
    # Named exactly as the call table names them, and every call of the table driven.
    assert driven == table
