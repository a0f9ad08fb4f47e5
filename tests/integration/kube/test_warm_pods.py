"""Warm task pods end to end: the real scheduler, SQLite store and agent endpoint, the
fake apiserver, and the fake kubelet running each pod's real ``leoflow agent --warm``."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.runtime.assembly import Runtime
from leoflow.runtime.lite import run_dag
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.fakekube.registry import PODS

from .conftest import TASK_NS, kube_lite_settings

pytestmark = pytest.mark.slow  # end to end through pods and real agents


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


async def _run(
    server: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dag: str,
    *,
    during: Callable[[Runtime, FakeKubelet], Awaitable[None]] | None = None,
    after: Callable[[Runtime], Awaitable[None]] | None = None,
) -> tuple[RunState, dict[str, TaskInstance], Runtime]:
    """Run ``dag`` to its end; ``during`` runs beside it, ``after`` once it ended, both
    while the scheduler and the kubelet still run."""
    settings = kube_lite_settings(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(dag)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))
    seen: list[Runtime] = []
    opened = asyncio.Event()

    def watch(runtime: Runtime) -> None:
        seen.append(runtime)
        opened.set()

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS) as kubelet:
        async with asyncio.timeout(120):
            running = asyncio.create_task(
                run_dag(settings, loaded, executor_name="kubernetes", watch=watch)
            )
            if during is not None:
                await opened.wait()
                await during(seen[0], kubelet)
            final, runtime = await running
            if after is not None:
                await after(runtime)
        tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
    return final.state, tis, runtime


def _warm_pods(server: FakeApiServer) -> dict[str, str]:
    """Warm pods on the apiserver: name -> phase."""
    return {
        p["metadata"]["name"]: (p.get("status") or {}).get("phase", "Pending")
        for p in server.store.objects("pods", TASK_NS)
        if p["metadata"]["labels"].get("leoflow.io/warm") == "true"
    }


async def _all_warm_pods_end(server: FakeApiServer) -> None:
    """Until every warm pod on the apiserver has Succeeded, from its watch events."""
    sub = server.store.subscribe("pods", TASK_NS)
    try:
        while set(_warm_pods(server).values()) != {"Succeeded"}:
            await sub.queue.get()
    finally:
        server.store.unsubscribe(sub)


def _warm_pod(ti: TaskInstance) -> tuple[str, int]:
    """(pod name, nth task in it) from a try's executor reference."""
    ref = ti.executor_ref or ""
    assert ref.startswith("pod:lfw-") and ";warm=" in ref, ref
    head, _, nth = ref.partition(";warm=")
    return head[4:].split("@")[0], int(nth)


CHAIN = """
dag_id: warm_chain
kubernetes:
  reuse_pods: {max_pods: 2, idle_timeout: 30s}
tasks:
  first:
    env: {ONLY_FIRST: "first-secret-ish"}
    command: >-
      echo first; echo leftover > "$TMPDIR/leak"; export LEAKED=1;
      (sleep 300 &) ; echo "$ONLY_FIRST" > "$TMPDIR/mine"
  second:
    depends_on: [first]
    command: >-
      echo second; ls -A "$TMPDIR"; if [ -e "$TMPDIR/leak" ]; then echo LEAK; exit 3; fi;
      if [ -n "$ONLY_FIRST$LEAKED" ]; then echo ENVLEAK; exit 4; fi
  third:
    depends_on: [second]
    command: ["sh", "-c", "echo third"]
"""


async def test_a_chain_runs_in_one_warm_pod_each_task_clean(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, tis, runtime = await _run(server, tmp_path, monkeypatch, CHAIN)
    try:
        assert state is RunState.SUCCESS, {t: (ti.state, ti.message) for t, ti in tis.items()}
        assert {t: ti.state for t, ti in tis.items()} == dict.fromkeys(tis, TaskState.SUCCESS)
        pods = {t: _warm_pod(ti) for t, ti in tis.items()}
        # One pod, its 1st, 2nd and 3rd task: no pod start after the first.
        assert {name for name, _ in pods.values()} == {pods["first"][0]}
        assert [pods[t][1] for t in ("first", "second", "third")] == [1, 2, 3]
        log = await runtime.store.read_log(tis["second"].pk, 1)
        assert b"second" in log and b"LEAK" not in log, log
    finally:
        await runtime.close()
    assert server.counts[("create", "", "pods")] == 1
    assert server.counts[("list", "", "pods")] == 1
    # The warm pod is owned by its DAG's GC anchor, as an ephemeral pod is, and the
    # anchor records the shape it holds.
    [pod] = [
        p
        for p in server.store.objects("pods", TASK_NS)
        if p["metadata"]["name"] in _warm_pods(server)
    ]
    [owner] = pod["metadata"]["ownerReferences"]
    anchors = {c["metadata"]["name"]: c for c in server.store.objects("configmaps", TASK_NS)}
    assert (
        owner["kind"] == "ConfigMap" and owner["uid"] == anchors[owner["name"]]["metadata"]["uid"]
    )
    assert (
        pod["metadata"]["labels"]["leoflow.io/pod-shape"]
        in anchors[owner["name"]]["data"]["shapes"]
    )


OOM = """
dag_id: warm_oom
kubernetes:
  reuse_pods: {max_pods: 1, idle_timeout: 30s}
tasks:
  hungry:
    env: {EVENTS: "%s"}
    command: printf 'oom 2\\noom_kill 1\\n' > "$EVENTS"; kill -9 $$
  after:
    depends_on: [hungry]
    trigger_rule: all_done
    command: echo after
"""


async def test_an_oom_retires_the_pod_and_the_next_task_gets_a_fresh_one(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    events = cgroup / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
    monkeypatch.setenv("LEOFLOW_CGROUP_ROOT", str(cgroup))  # the kubelet passes it on
    _, tis, runtime = await _run(server, tmp_path, monkeypatch, OOM % events)
    assert tis["hungry"].state is TaskState.FAILED
    assert tis["hungry"].reason == "oom", tis["hungry"].message
    assert tis["after"].state is TaskState.SUCCESS
    await runtime.close()
    (first, nth1), (second, nth2) = _warm_pod(tis["hungry"]), _warm_pod(tis["after"])
    assert first != second and (nth1, nth2) == (1, 1)
    assert server.counts[("create", "", "pods")] == 2


CHAIN_OF_THREE = """
dag_id: warm_max
kubernetes:
  reuse_pods: {max_pods: 1, idle_timeout: 30s, max_tasks_per_pod: 2}
tasks:
  a: {command: "echo a"}
  b: {command: "echo b", depends_on: [a]}
  c: {command: "echo c", depends_on: [b]}
"""


async def test_max_tasks_per_pod_retires_the_pod(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, tis, runtime = await _run(server, tmp_path, monkeypatch, CHAIN_OF_THREE)
    await runtime.close()
    assert state is RunState.SUCCESS
    pods = {t: _warm_pod(ti) for t, ti in tis.items()}
    assert pods["a"][0] == pods["b"][0] != pods["c"][0]
    assert [pods[t][1] for t in "abc"] == [1, 2, 1]
    assert server.counts[("create", "", "pods")] == 2


IDLE = """
dag_id: warm_idle
kubernetes:
  reuse_pods: {max_pods: 3, idle_timeout: 300ms}
tasks:
  a: {command: "echo a"}
  b: {command: "echo b"}
  c: {command: "echo c"}
"""


async def test_idle_pods_retire_and_the_dag_scales_to_zero(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def all_ended(runtime: Runtime) -> None:
        await _all_warm_pods_end(server)  # each retired itself, idle past idle_timeout

    state, _, runtime = await _run(server, tmp_path, monkeypatch, IDLE, after=all_ended)
    await runtime.close()
    assert state is RunState.SUCCESS
    assert 1 <= server.counts[("create", "", "pods")] <= 3


DIES = """
dag_id: warm_dies
kubernetes:
  reuse_pods: {max_pods: 1, idle_timeout: 30s}
tasks:
  slow:
    env: {FIFO: "%s"}
    command: >-
      if [ "$LEOFLOW_TRY_NUMBER" -lt 2 ]; then echo started > "$FIFO"; sleep 60; fi;
      echo done
"""


async def test_a_warm_pod_dying_mid_task_costs_the_try_no_retry(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)

    async def kill_the_pod(runtime: Runtime, kubelet: FakeKubelet) -> None:
        # The task says it runs through the FIFO (its write waits for this read).
        assert await asyncio.to_thread(fifo.read_text) == "started\n"
        (name,) = _warm_pods(server)
        assert kubelet.lose(TASK_NS, name)

    dag = DIES % fifo
    state, tis, runtime = await _run(server, tmp_path, monkeypatch, dag, during=kill_the_pod)
    try:
        # No retries declared: a second try only because the first cost none.
        assert state is RunState.SUCCESS, tis["slow"]
        assert tis["slow"].try_number == 2
        assert b"done" in await runtime.store.read_log(tis["slow"].pk, 2)
    finally:
        await runtime.close()
    assert server.counts[("create", "", "pods")] == 2


TIMEOUT = """
dag_id: warm_timeout
kubernetes:
  reuse_pods: {max_pods: 1, idle_timeout: 30s}
tasks:
  slow: {command: "echo begun; sleep 60", timeout: 1s}
  after: {command: "echo after", depends_on: [slow], trigger_rule: all_done}
"""


async def test_a_timeout_kill_retires_the_pod(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, tis, runtime = await _run(server, tmp_path, monkeypatch, TIMEOUT)
    await runtime.close()
    assert (tis["slow"].state, tis["slow"].reason) == (TaskState.FAILED, "timeout")
    assert tis["after"].state is TaskState.SUCCESS
    (first, _), (second, nth) = _warm_pod(tis["slow"]), _warm_pod(tis["after"])
    assert first != second and nth == 1


async def test_an_idle_warm_pod_deleted_stops_at_once_not_after_its_grace(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting an idle warm pod (SIGTERM) ends its agent cleanly (exit 0) at once,
    instead of waiting for work until the kubelet's SIGKILL after the grace period."""
    phases: list[str] = []

    async def delete_it(runtime: Runtime) -> None:
        (name,) = _warm_pods(server)
        sub = server.store.subscribe("pods", TASK_NS)
        try:
            server.registry.delete(PODS, TASK_NS, name, grace=60)
            while True:
                event = await sub.queue.get()
                if event is None or event.obj["metadata"]["name"] != name:
                    continue
                phases.append((event.obj.get("status") or {}).get("phase", ""))
                if event.type == "DELETED":
                    return
        finally:
            server.store.unsubscribe(sub)

    dag = IDLE.replace("300ms", "300s").replace("max_pods: 3", "max_pods: 1")
    state, _, runtime = await _run(server, tmp_path, monkeypatch, dag, after=delete_it)
    await runtime.close()
    assert state is RunState.SUCCESS
    assert "Succeeded" in phases and "Failed" not in phases, phases
