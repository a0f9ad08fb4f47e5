"""Trigger rules through the Kubernetes executor on the fake apiserver: a skipped task
never gets a pod, an all_done cleanup gets one after its upstream failed."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.lite import run_dag
from leoflow.settings import load_settings
from tests.fakekube import FakeApiServer, FakeKubelet

from .conftest import TASK_NS

pytestmark = pytest.mark.slow  # end to end through pods and real agents


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


DAG = """
dag_id: kube_rules
tasks:
  extract: {command: ["sh", "-c", "exit 4"]}
  check: {command: ["sh", "-c", "echo checked"]}
  alert: {command: ["sh", "-c", "echo never"], depends_on: [check], trigger_rule: one_failed}
  cleanup:
    command: ["sh", "-c", "echo cleaned"]
    depends_on: [extract, alert]
    trigger_rule: all_done
"""


async def test_skipped_task_gets_no_pod_and_cleanup_runs_after_a_failure(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    (tmp_path / "secrets").mkdir()
    settings = load_settings(
        home=tmp_path / "home",
        secrets_dir=tmp_path / "secrets",
        scheduler_poll_interval=0.2,
        task_namespace=TASK_NS,
        executor="kubernetes",
    )
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        final, runtime = await asyncio.wait_for(
            run_dag(settings, loaded, executor_name="kubernetes"), 60
        )
        try:
            tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
            assert {t: ti.state for t, ti in tis.items()} == {
                "extract": TaskState.FAILED,
                "check": TaskState.SUCCESS,
                "alert": TaskState.SKIPPED,
                "cleanup": TaskState.SUCCESS,
            }
            assert b"cleaned" in await runtime.store.read_log(tis["cleanup"].pk, 1)
            assert final.state is RunState.SUCCESS  # the only leaf, cleanup, succeeded
        finally:
            await runtime.close()

    names = set(server.pod_names(TASK_NS))
    assert len(names) == 3, names  # extract, check, cleanup: none for the skipped alert
    assert not any("alert" in name for name in names), names
