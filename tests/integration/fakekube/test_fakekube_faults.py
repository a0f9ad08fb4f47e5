"""Fault injection and request accounting."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fakekube import FakeApiServer, RequestInfo

from .conftest import NS, error_body, pod_manifest


def creates(info: RequestInfo) -> bool:
    return info.verb == "create" and info.resource == "pods"


async def test_counts_per_verb_and_reset(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("c1"))
    await v1.read_namespaced_pod("c1", NS)
    await v1.list_namespaced_pod(NS)
    await v1.list_namespaced_pod(NS)
    assert server.counts == {
        ("create", "", "pods"): 1,
        ("get", "", "pods"): 1,
        ("list", "", "pods"): 2,
    }
    server.reset_counts()
    assert sum(server.counts.values()) == 0
    assert ("list", "", "pods", NS) in server.seen


async def test_fail_next_n_matching_requests(v1: Any, server: FakeApiServer) -> None:
    server.fail_next(2, status=500, when=creates)
    await v1.list_namespaced_pod(NS)  # does not match: unaffected
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await v1.create_namespaced_pod(NS, pod_manifest("f"))
        assert err.value.status == 500
        assert error_body(err)["reason"] == "InternalError"
    created = await v1.create_namespaced_pod(NS, pod_manifest("f"))
    assert created.metadata.name == "f"


async def test_fail_with_any_status(v1: Any, server: FakeApiServer) -> None:
    server.fail_next(1, status=429)
    with pytest.raises(ApiException) as err:
        await v1.list_namespaced_pod(NS)
    assert err.value.status == 429
    assert err.value.headers is not None and err.value.headers["Retry-After"] == "1"


async def test_latency_holds_the_request(v1: Any, server: FakeApiServer) -> None:
    arrived = asyncio.Event()

    def slow_creates(info: RequestInfo) -> bool:
        if creates(info):
            arrived.set()
            return True
        return False

    server.add_latency(0.3, when=slow_creates)
    pending = asyncio.ensure_future(v1.create_namespaced_pod(NS, pod_manifest("slow")))
    async with asyncio.timeout(5):
        await arrived.wait()
    # the request has arrived but is held: nothing stored yet
    assert server.pod(NS, "slow") is None
    await pending
    assert server.pod(NS, "slow") is not None
    server.clear_faults()


async def test_go_away_refuses_then_comes_back(v1: Any, server: FakeApiServer) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("kept"))
    port = server.port
    await server.go_away("refuse")
    with pytest.raises(aiohttp.ClientConnectorError):
        await v1.list_namespaced_pod(NS)
    await server.come_back()
    assert server.port == port
    listed = await v1.list_namespaced_pod(NS)
    assert [p.metadata.name for p in listed.items] == ["kept"]


async def test_go_away_503_drops_watches(v1: Any, server: FakeApiServer) -> None:
    async with watch.Watch() as w:
        waiting = asyncio.ensure_future(anext(w.stream(v1.list_namespaced_pod, NS)))
        await server.wait_open_watches(1)
        await server.go_away("503")
        with pytest.raises(aiohttp.ClientPayloadError):
            await waiting
    with pytest.raises(ApiException) as err:
        await v1.list_namespaced_pod(NS)
    assert err.value.status == 503
    await server.come_back()
    assert (await v1.list_namespaced_pod(NS)).items == []


async def test_go_away_for_a_duration_comes_back_by_itself(v1: Any, server: FakeApiServer) -> None:
    await server.go_away("503", duration=0.2)
    with pytest.raises(ApiException):
        await v1.list_namespaced_pod(NS)
    async with asyncio.timeout(5):
        while True:
            try:
                await v1.list_namespaced_pod(NS)
                break
            except ApiException as exc:
                assert exc.status == 503
                await asyncio.sleep(0.05)


async def test_open_watch_count(v1: Any, server: FakeApiServer) -> None:
    async with watch.Watch() as w1, watch.Watch() as w2:
        first = asyncio.ensure_future(anext(w1.stream(v1.list_namespaced_pod, NS)))
        second = asyncio.ensure_future(anext(w2.stream(v1.list_namespaced_pod, NS)))
        await server.wait_open_watches(2)
        assert server.open_watches == 2
        await v1.create_namespaced_pod(NS, pod_manifest("wake"))
        assert (await first)["type"] == (await second)["type"] == "ADDED"
    # the clients hung up: the server notices and stops serving those watches
    await server.wait_open_watches(0)
