"""End to end: ``leoflow run FILE --executor kubernetes``'s wiring (lite.run_dag →
make_executor → KubernetesExecutor) with the real scheduler, SQLite store and agent
endpoint, the fake apiserver, and the fake kubelet running each pod's command — a real
``leoflow agent`` that dials the endpoint with the pod's ticket."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadedDag, LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.lite import run_dag
from leoflow.settings import load_settings
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome

from .conftest import TASK_NS

pytestmark = pytest.mark.slow  # end to end through pods and real agents


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    """Collect the kubelet's finished subprocess transports while the loop still runs;
    collected after it closes they warn (``Event loop is closed``) in a later test."""
    yield
    gc.collect()
    await asyncio.sleep(0)


DAG = """
dag_id: kube_e2e
tasks:
  extract_a:
    command: ["sh", "-c", "echo extracting a; echo pod $LEOFLOW_POD_NAME"]
  extract_b:
    retries: 1
    retry_delay: 100ms
    command: >-
      if [ "$LEOFLOW_TRY_NUMBER" -lt 2 ]; then echo "source busy" >&2; exit 75; fi;
      echo extracting b
  merge:
    depends_on: [extract_a, extract_b]
    command: ["sh", "-c", "echo merged"]
"""


async def test_dag_runs_through_pods_and_real_agents(
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
    loaded: LoadedDag = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        final, runtime = await asyncio.wait_for(
            run_dag(settings, loaded, executor_name="kubernetes"), 60
        )
        try:
            assert final.state is RunState.SUCCESS, final
            tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
            assert {t: ti.state for t, ti in tis.items()} == dict.fromkeys(
                ("extract_a", "extract_b", "merge"), TaskState.SUCCESS
            )
            assert tis["extract_b"].try_number == 2
            assert b"extracting a" in await runtime.store.read_log(tis["extract_a"].pk, 1)
            assert b"source busy" in await runtime.store.read_log(tis["extract_b"].pk, 1)
            assert b"merged" in await runtime.store.read_log(tis["merge"].pk, 1)
            ref = tis["merge"].executor_ref or ""
            assert ref.startswith("pod:lf-kube-e2e-merge-"), ref
        finally:
            await runtime.close()

    names = set(server.pod_names(TASK_NS))
    assert len(names) == 4, names  # a, b try 1, b try 2, merge: one pod per try
    assert server.counts[("create", "", "pods")] == 4
    assert server.counts[("list", "", "pods")] == 1
    assert server.counts[("get", "", "pods")] == 0


@pytest.mark.timeout(300)  # three Python processes starting; a loaded machine is slow at that
def _cli_env(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    # The fake kubelet (in this process) starts the pods' `leoflow agent`.
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    env = {
        **os.environ,
        "KUBECONFIG": str(server.kubeconfig(tmp_path / "kubeconfig")),
        "LEOFLOW_HOME": str(tmp_path / "home"),
        "LEOFLOW_SECRETS_DIR": str(tmp_path),
        "LEOFLOW_TASK_NAMESPACE": TASK_NS,
        "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2",
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


async def _leoflow_run(path: Path, env: dict[str, str]) -> tuple[int | None, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "leoflow", "run", str(path), "--executor", "kubernetes",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode, out.decode(errors="replace")


async def test_leoflow_run_cli_with_the_kubernetes_executor(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``leoflow run FILE --executor kubernetes`` as a user runs it: its own process, the
    settings from the environment, the exit code of the run (1: a task failed)."""
    env = _cli_env(server, tmp_path, monkeypatch)
    path = tmp_path / "dag.yaml"
    path.write_text(
        "dag_id: cli_kube\ntasks:\n  ok: {command: 'echo fine'}\n"
        "  bad: {command: 'exit 9', depends_on: [ok]}\n"
    )
    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        code, text = await _leoflow_run(path, env)
    assert code == 1, text
    assert "exited with code 9" in text or "exit code 9" in text, text
    assert "ok    success" in text, text
    assert len(server.pod_names(TASK_NS)) == 2


async def test_leoflow_run_leaves_no_pod_whose_image_never_pulls(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admission policy set imagePullPolicy Never and the image is not on the node:
    the try fails at once (not after pod_pending_timeout), and the run's exit still
    deletes the pod, even when the apiserver answers the first DELETE with a 503."""
    env = {**_cli_env(server, tmp_path, monkeypatch), "LEOFLOW_POD_PENDING_TIMEOUT": "3600"}
    path = tmp_path / "dag.yaml"
    path.write_text("dag_id: never_pulled\ntasks:\n  only: {command: 'true'}\n")
    server.fail_next(1, 503, when=lambda i: i.verb == "delete" and i.resource == "pods")
    async with FakeKubelet(server, default=Outcome.waiting("ErrImageNeverPull")):
        code, text = await _leoflow_run(path, env)
    assert code == 1, text
    assert "pull policy of Never" in text, text
    assert server.pod_names(TASK_NS) == [], "the run ended with its pod left behind"
    assert server.counts[("delete", "", "pods")] == 2
