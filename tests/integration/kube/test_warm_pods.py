"""Warm task pods end to end: the real scheduler, SQLite store and agent endpoint, the
fake apiserver, and the fake kubelet running each pod's real ``leoflow agent --warm``."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.runtime.lite import run_dag
from leoflow.runtime.assembly import Runtime
from tests.fakekube import FakeApiServer, FakeKubelet

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
    kubelet: FakeKubelet | None = None,
) -> tuple[RunState, dict[str, TaskInstance], Runtime]:
    settings = kube_lite_settings(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(dag)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))
    async with kubelet or FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        async with asyncio.timeout(120):
            final, runtime = await run_dag(settings, loaded, executor_name="kubernetes")
        tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
    return final.state, tis, runtime


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
