"""PodCache over the fake apiserver: list → watch, resume from the last resourceVersion,
relist on 410, back off while the apiserver is gone, and the ``synced`` state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from leoflow.kube.client import KubeClient
from leoflow.kube.pod import build_pod
from leoflow.kube.podcache import PodCache
from leoflow.kube.records import PodRecord
from tests.fakekube import FakeApiServer

from .conftest import TASK_NS, launch_for, make_settings

LIST = ("list", "", "pods")
WATCH = ("watch", "", "pods")


class Changes:
    def __init__(self) -> None:
        self.seen: list[tuple[PodRecord | None, PodRecord | None]] = []
        self._changed = asyncio.Event()

    def __call__(self, old: PodRecord | None, new: PodRecord | None) -> None:
        self.seen.append((old, new))
        self._changed.set()

    async def wait(
        self, pred: Callable[[list[tuple[PodRecord | None, PodRecord | None]]], bool]
    ) -> None:
        async with asyncio.timeout(10):
            while not pred(self.seen):
                self._changed.clear()
                await self._changed.wait()


def pod(ti_pk: int, **labels: str) -> dict[str, Any]:
    body = build_pod(launch_for(ti_pk), make_settings(), agent_endpoint="127.0.0.1:1")
    body["metadata"]["labels"].update(labels)
    return body


def name(ti_pk: int) -> str:
    return str(pod(ti_pk)["metadata"]["name"])


async def until(cache: PodCache, pred: Callable[[PodCache], bool]) -> None:
    """Wait for the cache to reach a state, woken by its own change callbacks."""
    changed = asyncio.Event()
    cache.add_listener(lambda old, new: changed.set())
    async with asyncio.timeout(10):
        while not pred(cache):
            changed.clear()
            await changed.wait()


@pytest.fixture
async def cache(kube: KubeClient) -> AsyncIterator[PodCache]:
    c = PodCache(kube, backoff_base=0.05, backoff_cap=0.2)
    yield c
    await c.stop()


def phase(server: FakeApiServer, ti_pk: int, value: str) -> None:
    def change(status: dict[str, Any]) -> None:
        status["phase"] = value

    server.registry.mutate_status(TASK_NS, name(ti_pk), change)


async def test_list_then_watch(server: FakeApiServer, kube: KubeClient, cache: PodCache) -> None:
    await kube.create_pod(pod(1))
    other = pod(99)
    other["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone-else"
    await kube.create_pod(other)
    changes = Changes()
    cache.add_listener(changes)
    cache.start()
    assert await cache.wait_synced(timeout=60)
    assert [r.name for r in cache.pods()] == [name(1)], "only Leoflow's pods, by label"
    await kube.create_pod(pod(2))
    phase(server, 1, "Running")
    await kube.delete_pod(name(2), grace_seconds=0)
    await changes.wait(lambda seen: any(new is None for _, new in seen))
    record = cache.get(name(1))
    assert record is not None and record.phase == "Running" and record.key == (1, 1)
    assert cache.get(name(2)) is None
    kinds = [("add" if o is None else "del" if n is None else "mod") for o, n in changes.seen]
    assert kinds[:2] == ["add", "add"] and kinds[-1] == "del" and "mod" in kinds
    assert [o.name for o, n in changes.seen if n is None and o is not None] == [name(2)]
    assert server.counts[LIST] == 1 and server.counts[WATCH] == 1


async def test_bookmarks_advance_the_resource_version(
    server: FakeApiServer, kube: KubeClient, cache: PodCache
) -> None:
    cache.start()
    assert await cache.wait_synced(timeout=60)
    listed = int(cache.resource_version or 0)
    # The store moves on with an object the cache does not select; only bookmarks say so.
    other = pod(5)
    other["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone-else"
    await kube.create_pod(other)
    async with asyncio.timeout(10):
        while int(cache.resource_version or 0) <= listed:  # noqa: ASYNC110 - no event to await
            await asyncio.sleep(0.05)
    assert len(cache) == 0, "a bookmark moves the resourceVersion, not the content"


@pytest.mark.parametrize("abrupt", [True, False], ids=["reset", "clean_eof"])
async def test_dropped_watch_resumes_from_last_resource_version(
    server: FakeApiServer, kube: KubeClient, cache: PodCache, abrupt: bool
) -> None:
    await kube.create_pod(pod(1))
    cache.start()
    assert await cache.wait_synced(timeout=60)
    await server.wait_open_watches(1)
    assert server.drop_watches(abrupt=abrupt) == 1
    # Changes while no watch is open arrive through the resumed watch's replay.
    await kube.create_pod(pod(2))
    await kube.delete_pod(name(1), grace_seconds=0)
    await until(cache, lambda c: c.get(name(2)) is not None and c.get(name(1)) is None)
    await server.wait_open_watches(1)
    assert cache.synced
    assert server.counts[LIST] == 1, "resumed, not re-listed"
    assert server.counts[WATCH] == 2


async def test_410_relists_and_replaces(
    server: FakeApiServer, kube: KubeClient, cache: PodCache
) -> None:
    await kube.create_pod(pod(1))
    await kube.create_pod(pod(2))
    changes = Changes()
    cache.add_listener(changes)
    cache.start()
    assert await cache.wait_synced(timeout=60)
    await server.go_away("refuse")
    assert await cache.wait_synced(False, timeout=10)
    # While it is away: one pod vanishes, one is added, one changes; history is compacted.
    server.registry.delete(server_pods(), TASK_NS, name(1), grace=0)
    server.registry.create(server_pods(), TASK_NS, pod(3), "test", lambda _: None)
    phase(server, 2, "Running")
    server.compact()
    await server.come_back()
    await until(
        cache,
        lambda c: (
            c.get(name(1)) is None
            and c.get(name(3)) is not None
            and (c.get(name(2)) or PodRecord("", "", None, None, "")).phase == "Running"
        ),
    )
    assert await cache.wait_synced(timeout=60)
    assert server.counts[LIST] == 2, "one list at start, one after the 410"
    assert cache.lists == 2
    gone = [old.name for old, new in changes.seen if new is None and old is not None]
    assert gone == [name(1)], "a pod that vanished between the lists is reported gone"


def server_pods() -> Any:
    from tests.fakekube.registry import PODS

    return PODS


async def test_503_and_refusal_back_off_then_converge(
    server: FakeApiServer, kube: KubeClient, cache: PodCache
) -> None:
    cache.start()
    assert await cache.wait_synced(timeout=60)
    await server.go_away("503")
    assert await cache.wait_synced(False, timeout=10)
    server.registry.create(server_pods(), TASK_NS, pod(7), "test", lambda _: None)
    await server.come_back()
    await until(cache, lambda c: c.get(name(7)) is not None)
    assert await cache.wait_synced(timeout=60)
    assert server.counts[LIST] == 1, "the history still covers the gap: resumed"


async def test_stop_leaves_no_watch_open(server: FakeApiServer, cache: PodCache) -> None:
    cache.start()
    assert await cache.wait_synced(timeout=60)
    await server.wait_open_watches(1)
    await cache.stop()
    await server.wait_open_watches(0)
    assert not cache.synced


async def test_list_pages_are_followed(server: FakeApiServer, kube: KubeClient) -> None:
    for i in range(1, 8):
        await kube.create_pod(pod(i))
    paged = PodCache(kube, page_size=3)
    paged.start()
    try:
        assert await paged.wait_synced(timeout=60)
        assert len(paged) == 7
        assert server.counts[LIST] == 3
    finally:
        await paged.stop()
