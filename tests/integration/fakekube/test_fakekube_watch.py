"""Watches through kubernetes_asyncio.watch.Watch: bookmarks, resume, selectors, 410, drops.

Notes for the PodCache author — how kubernetes_asyncio 36's ``Watch`` behaves here
(each is pinned by a test below):

- 410 on resume: the apiserver answers HTTP 200 with one ``ERROR`` event whose object
  is a Status ``{code: 410, reason: Expired}`` (transcript 18). ``Watch`` turns that
  into ``ApiException(status=410, reason="Expired: too old resource version: N (M)")``.
  Without ``timeout_seconds`` it first silently retries ONCE with the same (stale)
  resourceVersion — a wasted request — then raises; with ``timeout_seconds`` it
  raises at once. Either way the cache must catch 410 and re-list.
- A clean end of stream (server timeout, apiserver closing the watch): without
  ``timeout_seconds`` ``Watch`` reconnects by itself from the last resourceVersion it
  saw (bookmarks included); with ``timeout_seconds`` iteration just stops.
- A dropped connection (reset mid-stream) raises ``aiohttp.ClientPayloadError`` out
  of the iterator — not an ApiException; the cache must treat it as "resume from the
  last resourceVersion".
- A refused connection (apiserver gone) raises ``aiohttp.ClientConnectorError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fakekube import FakeApiServer

from .conftest import NS, pod_manifest


async def take(
    events: AsyncIterator[dict[str, Any]], n: int, skip_bookmarks: bool = True
) -> list[dict[str, Any]]:
    """The next ``n`` events (bookmarks skipped unless asked), with a safety deadline."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(10):
        async for event in events:
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            out.append(event)
            if len(out) == n:
                break
    return out


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in events]


async def test_watch_without_rv_starts_with_synthetic_added(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("existing"))
    async with watch.Watch() as w:
        events = await take(w.stream(v1.list_namespaced_pod, NS), 1)
    assert summary(events) == [("ADDED", "existing")]


async def test_bookmark_carries_only_resource_version(v1: Any) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("bm"))
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod,
            NS,
            resource_version=created.metadata.resource_version,
            allow_watch_bookmarks=True,
        )
        [bookmark] = await take(stream, 1, skip_bookmarks=False)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["raw_object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": created.metadata.resource_version},
        "spec": {"containers": None},
        "status": {},
    }
    assert w.resource_version == created.metadata.resource_version


async def test_no_bookmarks_unless_asked(v1: Any, server: FakeApiServer) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("quiet"))
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod, NS, resource_version=created.metadata.resource_version
        )
        waiting = asyncio.ensure_future(take(stream, 1, skip_bookmarks=False))
        await server.wait_open_watches(1)
        await v1.delete_namespaced_pod("quiet", NS)
        events = await waiting
    assert [e["type"] for e in events] == ["MODIFIED"]


async def test_resume_from_old_rv_replays_history(v1: Any) -> None:
    first = await v1.create_namespaced_pod(NS, pod_manifest("first"))
    await v1.create_namespaced_pod(NS, pod_manifest("second"))
    await v1.patch_namespaced_pod("first", NS, {"metadata": {"labels": {"x": "y"}}})
    await v1.delete_namespaced_pod("second", NS)
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod, NS, resource_version=first.metadata.resource_version
        )
        events = await take(stream, 4)
    assert summary(events) == [
        ("ADDED", "second"),
        ("MODIFIED", "first"),
        ("MODIFIED", "second"),  # deletionTimestamp stamped, grace 0
        ("DELETED", "second"),
    ]
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)


async def test_label_selector_watch_sees_leaving_as_deleted(v1: Any, server: FakeApiServer) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("mover", labels={"team": "a"}))
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod,
            NS,
            label_selector="team=a",
            resource_version=created.metadata.resource_version,
        )
        waiting = asyncio.ensure_future(take(stream, 3))
        await server.wait_open_watches(1)
        await v1.create_namespaced_pod(NS, pod_manifest("other", labels={"team": "b"}))
        await v1.patch_namespaced_pod("mover", NS, {"metadata": {"labels": {"team": "b"}}})
        await v1.patch_namespaced_pod("other", NS, {"metadata": {"labels": {"team": "a"}}})
        await v1.patch_namespaced_pod("other", NS, {"metadata": {"labels": {"more": "1"}}})
        events = await waiting
    assert summary(events) == [("DELETED", "mover"), ("ADDED", "other"), ("MODIFIED", "other")]
    # the DELETED object is the last one that matched, at the event's resourceVersion
    assert events[0]["raw_object"]["metadata"]["labels"] == {"team": "a"}


async def test_send_initial_events_ends_with_annotated_bookmark(v1: Any) -> None:
    await v1.create_namespaced_pod(NS, pod_manifest("init-1"))
    await v1.create_namespaced_pod(NS, pod_manifest("init-2"))
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod,
            NS,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            allow_watch_bookmarks=True,
        )
        events = await take(stream, 3, skip_bookmarks=False)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["raw_object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"
    }


async def test_compacted_rv_gets_410_and_watch_raises(v1: Any, server: FakeApiServer) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("old"))
    await v1.delete_namespaced_pod("old", NS)
    server.compact()
    server.reset_counts()
    with pytest.raises(ApiException) as err:
        async with watch.Watch() as w:
            await take(
                w.stream(
                    v1.list_namespaced_pod, NS, resource_version=created.metadata.resource_version
                ),
                1,
            )
    assert err.value.status == 410
    assert str(err.value.reason).startswith("Expired: too old resource version:")
    # Watch without timeout_seconds retries a 410 once with the same RV, then raises.
    assert server.counts[("watch", "", "pods")] == 2


async def test_compacted_rv_with_timeout_raises_at_once(v1: Any, server: FakeApiServer) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("old"))
    server.compact()
    server.reset_counts()
    with pytest.raises(ApiException) as err:
        async with watch.Watch() as w:
            await take(
                w.stream(
                    v1.list_namespaced_pod,
                    NS,
                    resource_version=str(int(created.metadata.resource_version) - 1),
                    timeout_seconds=30,
                ),
                1,
            )
    assert err.value.status == 410
    assert server.counts[("watch", "", "pods")] == 1


async def test_history_window_compacts_automatically(v1: Any) -> None:
    async with FakeApiServer(history_window=2) as small, small.api_client() as api:
        from kubernetes_asyncio import client

        core: Any = client.CoreV1Api(api)
        first = await core.create_namespaced_pod(NS, pod_manifest("h0"))
        for i in range(1, 4):
            await core.create_namespaced_pod(NS, pod_manifest(f"h{i}"))
        with pytest.raises(ApiException) as err:
            async with watch.Watch() as w:
                stream = w.stream(
                    core.list_namespaced_pod,
                    NS,
                    resource_version=first.metadata.resource_version,
                    timeout_seconds=5,
                )
                await take(stream, 1)
        assert err.value.status == 410
        assert small.store.compacted_rv > int(first.metadata.resource_version)


async def test_clean_drop_makes_watch_reconnect_from_last_rv(
    v1: Any, server: FakeApiServer
) -> None:
    created = await v1.create_namespaced_pod(NS, pod_manifest("d1"))
    async with watch.Watch() as w:
        stream = w.stream(
            v1.list_namespaced_pod, NS, resource_version=created.metadata.resource_version
        )
        waiting = asyncio.ensure_future(take(stream, 1))
        await server.wait_open_watches(1)
        assert server.drop_watches(abrupt=False) == 1
        await server.wait_open_watches(1)  # the client came back by itself
        await v1.create_namespaced_pod(NS, pod_manifest("d2"))
        events = await waiting
    assert summary(events) == [("ADDED", "d2")]
    assert server.counts[("watch", "", "pods")] == 2


async def test_abrupt_drop_raises_client_payload_error(v1: Any, server: FakeApiServer) -> None:
    async with watch.Watch() as w:
        stream = w.stream(v1.list_namespaced_pod, NS)
        waiting = asyncio.ensure_future(take(stream, 1))
        await server.wait_open_watches(1)
        server.drop_watches(abrupt=True)
        with pytest.raises(aiohttp.ClientPayloadError):
            await waiting
    await server.wait_open_watches(0)


async def test_timeout_seconds_ends_the_stream(v1: Any, server: FakeApiServer) -> None:
    async with watch.Watch() as w:
        events = [e async for e in w.stream(v1.list_namespaced_pod, NS, timeout_seconds=1)]
    assert events == []
    assert server.open_watches == 0
