"""Fixtures: a fake apiserver (task namespace under PSA ``restricted``), Leoflow's own
KubeClient on it, and a KubernetesExecutor wired to both with short timings."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from leoflow.domain.dag import TaskSpec
from leoflow.domain.execution import ExecutorEvent, Launch, TaskFinished
from leoflow.kube import calls
from leoflow.kube.client import KubeClient
from leoflow.kube.executor import KubernetesExecutor
from leoflow.settings import Settings, load_settings
from tests.fakekube import FakeApiServer

TOKEN = "kube-test-token"
TASK_NS = "leoflow-tasks"
RELEASE_NS = "leoflow-system"

# Every (verb, group, resource, namespace) the fake received in this package's tests.
SEEN: set[tuple[str, str, str, str]] = set()


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "task_namespace": TASK_NS,
        "release_namespace": RELEASE_NS,
        "agent_endpoint": "127.0.0.1:1",
        "pod_lost_grace": 0.5,
        "pod_gc_age": 3600.0,
        "pod_pending_timeout": 600.0,
    }
    values.update(overrides)
    return Settings(**values)


def launch_for(
    ti_pk: int,
    try_number: int = 1,
    *,
    task_id: str = "extract",
    dag_id: str = "nightly_sales",
    **spec: Any,
) -> Launch:
    return Launch(
        ti_pk=ti_pk,
        try_number=try_number,
        dag_id=dag_id,
        run_id="manual__2026-01-01T00:00:00+00:00_abc123",
        task_id=task_id,
        spec=TaskSpec(task_id=task_id, command=["true"], **spec),
        ticket=f"ticket-{ti_pk}-{try_number}",
    )


class Reports:
    """The executor's ``report`` callback, with an awaitable view of what arrived."""

    def __init__(self) -> None:
        self.events: list[ExecutorEvent] = []
        self._changed = asyncio.Event()

    def __call__(self, event: ExecutorEvent) -> None:
        self.events.append(event)
        self._changed.set()

    async def wait_for(
        self, pred: Callable[[ExecutorEvent], bool], timeout: float = 10.0
    ) -> ExecutorEvent:
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if pred(event):
                        return event
                self._changed.clear()
                await self._changed.wait()

    def finished(self) -> list[TaskFinished]:
        return [e for e in self.events if isinstance(e, TaskFinished)]

    async def wait_finished(
        self, pred: Callable[[TaskFinished], bool] = lambda _: True, timeout: float = 60.0
    ) -> TaskFinished:
        async with asyncio.timeout(timeout):
            while True:
                for event in self.finished():
                    if pred(event):
                        return event
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(
        token=TOKEN, restricted_namespaces=[TASK_NS], bookmark_interval=0.1
    ) as srv:
        yield srv
        SEEN.update(srv.seen)
        undeclared = {(v, g, r) for v, g, r, _ in srv.seen} - declared_calls()
        assert not undeclared, f"calls not in leoflow/kube/calls.py: {sorted(undeclared)}"
        namespaces = {ns for *_, ns in srv.seen}
        assert namespaces <= {TASK_NS, RELEASE_NS}, namespaces


@pytest.fixture
async def kube(server: FakeApiServer) -> AsyncIterator[KubeClient]:
    client = KubeClient(
        server.configuration(), task_namespace=TASK_NS, release_namespace=RELEASE_NS
    )
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture
async def reports() -> Reports:
    return Reports()


@pytest.fixture
async def executor(
    kube: KubeClient, settings: Settings, reports: Reports
) -> AsyncIterator[KubernetesExecutor]:
    ex = KubernetesExecutor(
        settings,
        client=kube,
        reap_interval=0.05,
        agent_grace=0.1,
        backoff_base=0.05,
        backoff_cap=0.2,
    )
    await ex.start(reports)
    assert ex.cache is not None
    assert await ex.cache.wait_synced(timeout=10)
    try:
        yield ex
    finally:
        await ex.stop()


def declared_calls() -> set[tuple[str, str, str]]:
    return {(c.verb, c.group, c.resource) for c in calls.CALLS}


def kube_lite_settings(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: Any
) -> Settings:
    """Settings for a Lite runtime whose tasks run as pods on ``server``, with real agents."""
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    (tmp_path / "secrets").mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "home": tmp_path / "home",
        "secrets_dir": tmp_path / "secrets",
        "scheduler_poll_interval": 0.2,
        "task_namespace": TASK_NS,
        "executor": "kubernetes",
        **overrides,
    }
    return load_settings(**values)
