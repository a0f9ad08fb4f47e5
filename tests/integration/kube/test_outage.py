"""The Kubernetes executor against an apiserver having a bad minute, over real HTTP.

Creates that get no useful answer (refused, 429, 5xx) wait and retry instead of
failing the try; only an answer that the pod is invalid fails it at once; a create
that waits longer than ``kube_outage_window`` fails naming the window. A watch that
goes silent while the apiserver keeps answering LISTs is restarted, and nothing is
judged lost from it meanwhile (a 410 during the silence relists).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from leoflow.domain.execution import LaunchError, LaunchWaiting
from leoflow.kube.client import KubeClient
from leoflow.kube.executor import KubernetesExecutor
from leoflow.kube.metrics import WATCH_SILENT
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome

from .conftest import RELEASE_NS, TASK_NS, TOKEN, Reports, launch_for, make_settings

CREATE = ("create", "", "pods")
WATCH = ("watch", "", "pods")
LIST = ("list", "", "pods")

BOOKMARK = 0.25  # the fake's bookmark interval in these tests
SILENCE = 2 * BOOKMARK  # kube_watch_silence: two missed bookmarks


async def start_executor(kube: KubeClient, reports: Reports, **settings: Any) -> KubernetesExecutor:
    ex = KubernetesExecutor(
        make_settings(**settings),
        client=kube,
        reap_interval=0.05,
        agent_grace=0.1,
        backoff_base=0.05,
        backoff_cap=0.2,
    )
    await ex.start(reports)
    assert ex.cache is not None and await ex.cache.wait_synced(timeout=10)
    return ex


def is_create(info: Any) -> bool:
    return bool(info.verb == "create" and info.resource == "pods")


async def test_create_waits_out_429_and_5xx_and_says_why(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, kube_retry_cap=0.2)
    try:
        server.fail_next(2, status=429, when=is_create)  # Retry-After: 1
        server.fail_next(2, status=503, when=is_create)
        server.fail_next(1, status=500, when=is_create)
        await ex.launch(launch_for(1))
    finally:
        await ex.stop()
    assert server.counts[CREATE] == 6
    assert len(server.pod_names(TASK_NS)) == 1
    notes = [e for e in reports.events if isinstance(e, LaunchWaiting)]
    assert notes[0].reason == "apiserver_unreachable"
    assert notes[0].message is not None and "apiserver unreachable since" in notes[0].message
    assert notes[-1].reason is None and notes[-1].message is None, "cleared once created"
    assert not reports.finished()


async def test_an_invalid_pod_fails_at_once(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports)
    try:
        server.fail_next(1, status=422, when=is_create, message="spec.containers: Required")
        with pytest.raises(LaunchError, match="refused the task's pod: 422"):
            await ex.launch(launch_for(1))
    finally:
        await ex.stop()
    assert server.counts[CREATE] == 1


async def test_an_outage_longer_than_the_window_fails_naming_it(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, kube_outage_window=1.0, kube_retry_cap=0.2)
    try:
        await server.go_away("refuse")
        with pytest.raises(LaunchError, match=r"kube_outage_window 1\.0s"):
            await ex.launch(launch_for(1))
    finally:
        await server.come_back()
        await ex.stop()
    assert not server.pod_names(TASK_NS)


async def test_a_cancel_while_the_create_waits_creates_no_pod(
    server: FakeApiServer, kube: KubeClient, reports: Reports
) -> None:
    ex = await start_executor(kube, reports, kube_retry_cap=0.2)
    try:
        await server.go_away("refuse")
        launching = asyncio.create_task(ex.launch(launch_for(1)))
        await reports.wait_for(lambda e: isinstance(e, LaunchWaiting))
        await ex.cancel(1, 1, "run cancelled")
        with pytest.raises(LaunchError, match="cancelled"):
            await launching
        await server.come_back()
    finally:
        await ex.stop()
    assert not server.pod_names(TASK_NS)


# ---- silent watches ------------------------------------------------------------------


@pytest.fixture
async def quiet_server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(
        token=TOKEN, restricted_namespaces=[TASK_NS], bookmark_interval=BOOKMARK
    ) as srv:
        yield srv
        namespaces = {ns for *_, ns in srv.seen}
        assert namespaces <= {TASK_NS, RELEASE_NS}, namespaces


@pytest.fixture
async def quiet_kube(quiet_server: FakeApiServer) -> AsyncIterator[KubeClient]:
    client = KubeClient(
        quiet_server.configuration(), task_namespace=TASK_NS, release_namespace=RELEASE_NS
    )
    try:
        yield client
    finally:
        await client.close()


async def silent_watch_round(
    server: FakeApiServer, kube: KubeClient, reports: Reports, *, compact: bool
) -> KubernetesExecutor:
    """10 tries launched before the silence, 10 during it; all must end in success."""
    # pod_lost_grace shorter than the silence: exactly the window where a cache that
    # trusted its silent watch judged pods that existed as lost.
    ex = await start_executor(
        kube, reports, kube_watch_silence=SILENCE, pod_lost_grace=0.2, kube_retry_cap=0.2
    )
    assert ex.cache is not None
    silent_before = WATCH_SILENT._value.get()
    kubelet = FakeKubelet(server, default=Outcome.succeed(after=1.5), namespace=TASK_NS)
    async with kubelet:
        for pk in range(1, 11):
            await ex.launch(launch_for(pk))
        assert server.silence_watches() == 1
        for pk in range(11, 21):
            await ex.launch(launch_for(pk))  # acknowledged; the silent watch never says so
        if compact:
            server.compact()  # the resume from the last resourceVersion gets 410
        # The dead watch is given up (its connection closed) and a new one opened.
        await server.wait_watches(silent=0, live=1, timeout=30)
        await reports.wait_for(
            lambda _: {e.ti_pk for e in reports.finished()} >= set(range(1, 21)), timeout=30
        )
    assert WATCH_SILENT._value.get() > silent_before
    outcomes = {e.ti_pk: e.reason for e in reports.finished()}
    assert outcomes == dict.fromkeys(range(1, 21), "success"), outcomes
    assert server.counts[CREATE] == 20
    return ex


async def test_a_silent_watch_is_restarted_and_nothing_is_judged_lost(
    quiet_server: FakeApiServer, quiet_kube: KubeClient, reports: Reports
) -> None:
    ex = await silent_watch_round(quiet_server, quiet_kube, reports, compact=False)
    try:
        assert ex.cache is not None and ex.cache.lists == 1, "resumed, not relisted"
    finally:
        await ex.stop()


async def test_a_410_during_the_silence_relists(
    quiet_server: FakeApiServer, quiet_kube: KubeClient, reports: Reports
) -> None:
    ex = await silent_watch_round(quiet_server, quiet_kube, reports, compact=True)
    try:
        assert ex.cache is not None and ex.cache.lists >= 2, "the 410 made it list again"
        assert quiet_server.counts[LIST] >= 2
    finally:
        await ex.stop()
