"""KubeClient over the wire: one method per declared call, errors, Leases, User-Agents."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leoflow.kube import calls
from leoflow.kube.calls import ApiCall
from leoflow.kube.client import KubeClient
from leoflow.kube.dag_anchor import DagAnchors
from leoflow.kube.errors import AlreadyExists, CallNotDeclared, Conflict, KubeUnavailable, Refused
from leoflow.kube.pod import build_pod
from leoflow.kube.token_bucket import TokenBucket
from tests.fakekube import FakeApiServer

from .conftest import RELEASE_NS, TASK_NS, declared_calls, launch_for, make_settings


def lease(name: str, holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": RELEASE_NS},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def a_pod(ti_pk: int = 1) -> dict[str, Any]:
    return build_pod(launch_for(ti_pk), make_settings(), agent_endpoint="127.0.0.1:1")


async def test_every_method_is_a_declared_call(server: FakeApiServer, kube: KubeClient) -> None:
    created = await kube.create_pod(a_pod())
    name = created["metadata"]["name"]
    page = await kube.list_pods("app.kubernetes.io/managed-by=leoflow")
    assert [p["metadata"]["name"] for p in page["items"]] == [name]
    rv = page["metadata"]["resourceVersion"]
    async with kube.watch_pods("app.kubernetes.io/managed-by=leoflow", rv) as stream:
        await server.wait_open_watches(1)
        assert server.open_watches == 1
        await kube.delete_pod(name, grace_seconds=0)
        async for kind, obj in stream.events():
            if kind == "DELETED":
                assert obj["metadata"]["name"] == name
                break
    server.store.append_log(TASK_NS, name, "task", "hello\n")
    await kube.create_pod(a_pod(2))
    name2 = a_pod(2)["metadata"]["name"]
    server.store.append_log(TASK_NS, name2, "task", "hello\n")
    assert await kube.read_pod_log(name2) == "hello\n"
    assert await kube.get_lease("leader") is None
    await kube.create_lease(lease("leader", "a"))
    assert (await kube.get_lease("leader")) is not None
    got = await kube.get_lease("leader")
    assert got is not None
    await kube.update_lease("leader", got)
    # The GC anchors' calls, made by the code that makes them: create, then (another
    # life) a 409 read back with get, the start-up sweep's list, a gone DAG's delete.
    await DagAnchors(lambda: kube, TASK_NS).ensure("sales")
    assert (await DagAnchors(lambda: kube, TASK_NS).ensure("sales"))["kind"] == "ConfigMap"
    assert await DagAnchors(lambda: kube, TASK_NS).sweep(live=set()) == ["sales"]
    used = {(v, g, r) for v, g, r, _ in server.seen}
    assert used == declared_calls(), "every declared call is exercised, and nothing else"


async def test_undeclared_call_is_refused(kube: KubeClient) -> None:
    rogue = ApiCall("list_nodes", "list", "", "nodes", "task")
    with pytest.raises(CallNotDeclared):
        await kube._send(rogue, "dispatch")
    with pytest.raises(CallNotDeclared):
        await kube._send(calls.DELETE_POD, "gc")  # a delete needs a name


async def test_paths_come_from_the_table(kube: KubeClient) -> None:
    assert kube.path(calls.CREATE_POD) == f"/api/v1/namespaces/{TASK_NS}/pods"
    assert kube.path(calls.READ_POD_LOG, "p") == f"/api/v1/namespaces/{TASK_NS}/pods/p/log"
    assert (
        kube.path(calls.UPDATE_LEASE, "l")
        == f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NS}/leases/l"
    )


async def test_create_twice_is_already_exists(server: FakeApiServer, kube: KubeClient) -> None:
    await kube.create_pod(a_pod())
    with pytest.raises(AlreadyExists):
        await kube.create_pod(a_pod())
    assert len(server.pod_names(TASK_NS)) == 1


async def test_delete_missing_is_false(kube: KubeClient) -> None:
    assert await kube.delete_pod("lf-nothing-1-1") is False


async def test_lease_conflict_on_stale_resource_version(kube: KubeClient) -> None:
    first = await kube.create_lease(lease("leader", "a"))
    assert first["metadata"]["resourceVersion"]
    with pytest.raises(AlreadyExists):
        await kube.create_lease(lease("leader", "b"))
    stale = dict(first)
    fresh = await kube.update_lease("leader", {**first, "spec": {"holderIdentity": "a"}})
    assert fresh["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    with pytest.raises(Conflict) as err:
        await kube.update_lease("leader", {**stale, "spec": {"holderIdentity": "b"}})
    assert not isinstance(err.value, AlreadyExists)
    assert err.value.status == 409


async def test_psa_rejection_is_refused_not_retryable(kube: KubeClient) -> None:
    pod = a_pod()
    pod["spec"]["securityContext"].pop("runAsNonRoot")
    with pytest.raises(Refused) as err:
        await kube.create_pod(pod)
    assert err.value.status == 403 and not err.value.retryable
    assert "restricted" in err.value.message


async def test_refused_connection_is_unavailable(server: FakeApiServer, kube: KubeClient) -> None:
    await server.go_away("refuse")
    with pytest.raises(KubeUnavailable) as err:
        await kube.list_pods("a=b")
    assert err.value.retryable
    await server.come_back()
    await kube.list_pods("a=b")


async def test_user_agent_names_each_component(server: FakeApiServer, kube: KubeClient) -> None:
    await kube.create_pod(a_pod())
    await kube.list_pods("a=b")
    await kube.get_lease("x")
    await kube.delete_pod("nothing")
    agents = {c: api.user_agent for c, api in kube._clients.items()}
    assert agents == {
        "dispatch": "leoflow-scheduler/0.1.0 (dispatch)",
        "podcache": "leoflow-scheduler/0.1.0 (podcache)",
        "leader": "leoflow-scheduler/0.1.0 (leader)",
        "gc": "leoflow-scheduler/0.1.0 (gc)",
    }
    # and on the wire: the apiserver names the field manager after the User-Agent
    pod = server.pod(TASK_NS, a_pod()["metadata"]["name"])
    assert pod is not None
    assert pod["metadata"]["managedFields"][0]["manager"] == "leoflow-scheduler"


async def test_kubeconfig_loading(
    server: FakeApiServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    client = await KubeClient.from_settings(make_settings())
    try:
        await client.create_pod(a_pod())
        assert server.pod_names(TASK_NS) == [a_pod()["metadata"]["name"]]
    finally:
        await client.close()


async def test_token_bucket_paces_after_the_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    monkeypatch.setattr("leoflow.kube.token_bucket.time.monotonic", lambda: now[0])
    monkeypatch.setattr("leoflow.kube.token_bucket.asyncio.sleep", fake_sleep)
    bucket = TokenBucket(rate=10.0, burst=3)
    for _ in range(5):
        await bucket.take()
    assert waits == [pytest.approx(0.1), pytest.approx(0.1)]


async def test_token_bucket_keeps_its_rate_when_sleeps_overshoot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A busy loop wakes a sleeper late; the late part must count towards the next
    # token, not be lost to the rate.
    now = [100.0]
    waits: list[float] = []

    async def late_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds + 0.04

    monkeypatch.setattr("leoflow.kube.token_bucket.time.monotonic", lambda: now[0])
    monkeypatch.setattr("leoflow.kube.token_bucket.asyncio.sleep", late_sleep)
    bucket = TokenBucket(rate=10.0, burst=1)
    for _ in range(4):
        await bucket.take()
    # Token 2 was due 0.1 s after the start and came at 0.14: token 3 is due 0.06 later.
    assert waits == [pytest.approx(0.1), pytest.approx(0.06), pytest.approx(0.06)]


async def test_token_bucket_spaces_concurrent_takers_and_refunds_a_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_sleep = asyncio.sleep  # the patch below replaces asyncio's own
    now = [100.0]
    waits: list[float] = []
    gates: list[asyncio.Future[None]] = []

    async def held_sleep(seconds: float) -> None:
        waits.append(seconds)
        gate = asyncio.get_running_loop().create_future()
        gates.append(gate)
        await gate

    monkeypatch.setattr("leoflow.kube.token_bucket.time.monotonic", lambda: now[0])
    monkeypatch.setattr("leoflow.kube.token_bucket.asyncio.sleep", held_sleep)
    bucket = TokenBucket(rate=10.0, burst=2)
    takers = [asyncio.create_task(bucket.take()) for _ in range(5)]
    for _ in range(3):
        await real_sleep(0)
    # Two from the burst; the next three each reserve the token after the last one's.
    assert [t.done() for t in takers] == [True, True, False, False, False]
    assert waits == [pytest.approx(0.1), pytest.approx(0.2), pytest.approx(0.3)]
    takers[4].cancel()
    with pytest.raises(asyncio.CancelledError):
        await takers[4]
    # The cancelled reservation is given back: the next taker gets its slot.
    late = asyncio.create_task(bucket.take())
    await real_sleep(0)
    assert waits[-1] == pytest.approx(0.3)
    for gate in gates:
        if not gate.done():  # the cancelled taker's was cancelled with it
            gate.set_result(None)
    await asyncio.gather(*takers[:4], late)


async def test_the_environment_is_read_once_per_client_not_per_request(
    server: FakeApiServer, kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp's trust_env looked the proxy and ~/.netrc up in a worker thread on
    # every request; the client asks once, when a component's ApiClient is made.
    def per_request(*_: object) -> None:
        raise AssertionError("the environment was read for a request")

    monkeypatch.setattr("aiohttp.client.get_env_proxy_for_url", per_request)
    monkeypatch.setattr("aiohttp.client.ClientSession._get_netrc_auth", per_request)
    await kube.create_pod(a_pod())
    await kube.create_pod(a_pod(2))
    assert len(await kube.list_pods("app.kubernetes.io/managed-by=leoflow")) > 0


async def test_a_proxy_from_the_environment_still_applies(
    server: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes_asyncio.client import Configuration

    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = KubeClient(
        Configuration(host="https://apiserver.example:6443"),
        task_namespace=TASK_NS,
        release_namespace=RELEASE_NS,
    )
    try:
        rest = client._api("dispatch").rest_client
        assert rest.proxy == "http://proxy.example:3128"
        assert rest.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        assert not rest.pool_manager.trust_env
    finally:
        await client.close()
    monkeypatch.setenv("NO_PROXY", "apiserver.example")
    client = KubeClient(
        Configuration(host="https://apiserver.example:6443"),
        task_namespace=TASK_NS,
        release_namespace=RELEASE_NS,
    )
    try:
        assert client._api("dispatch").rest_client.proxy is None
    finally:
        await client.close()
