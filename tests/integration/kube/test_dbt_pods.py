"""A hybrid dbt DAG through the Kubernetes executor: the fake apiserver, the fake kubelet
running each pod's real ``leoflow agent``, real dbt from ``.venv-dbt`` and real DuckDB.

The pods are the same pods as any task's (the agent's command, a read-only root with
/tmp mounted), and the agent in them runs the very command and env Lite runs.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dbt.project import expander
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.lite import run_dag
from leoflow.settings import TaskPodSecurity, load_settings
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.support.dbt import copy_project, dbt_bin, query

from .conftest import TASK_NS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # runs dbt in pods


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


async def test_dbt_nodes_run_in_hardened_pods_with_the_same_command_and_env(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    copy_project(tmp_path, "shop")
    database = tmp_path / "shop.duckdb"
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "warehouse_password").write_text("s3cret")
    settings = load_settings(
        home=tmp_path / "home",
        secrets_dir=tmp_path / "secrets",
        scheduler_poll_interval=0.2,
        task_namespace=TASK_NS,
        executor="kubernetes",
        task_pod_security=TaskPodSecurity(read_only_root_filesystem=True),
    )
    path = tmp_path / "dag.yaml"
    path.write_text(
        f"""
dag_id: kube_dbt
max_active_tasks: 1
tasks:
  after:
    command: ["sh", "-c", "echo customers are staged"]
    depends_on: [dbt.stg_customers]
dbt:
  project_dir: shop
  profiles_dir: profiles
  executable: {dbt_bin()}
  select: ["+stg_customers"]
  defaults:
    env: {{SHOP_DUCKDB_PATH: "{database}"}}
    secrets: [warehouse_password]
"""
    )
    options = LoadOptions(passthrough=settings.task_pod_passthrough, dbt=expander(tmp_path / "c"))
    loaded = load_dag_file(path, options)
    spec = loaded.spec
    assert set(spec.tasks) == {
        "after",
        "dbt.raw_customers",
        "dbt.stg_customers",
        "dbt.test.not_null_stg_customers_customer_id",
        "dbt.test.unique_stg_customers_customer_id",
    }

    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        final, runtime = await asyncio.wait_for(
            run_dag(settings, loaded, executor_name="kubernetes"), 540
        )
        try:
            tis = {t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)}
            assert final.state is RunState.SUCCESS, {
                t: (i.state, i.message) for t, i in tis.items()
            }
            assert {ti.state for ti in tis.values()} == {TaskState.SUCCESS}
            log = await runtime.store.read_log(tis["dbt.stg_customers"].pk, 1)
            assert b"1 of 1 OK created sql view model main.stg_customers" in log, log[-2000:]
            pods = {
                t: server.pod(TASK_NS, (ti.executor_ref or "").removeprefix("pod:").split("@")[0])
                for t, ti in tis.items()
            }
        finally:
            await runtime.close()

    seed_pod = pods["dbt.raw_customers"]
    assert seed_pod is not None
    container = seed_pod["spec"]["containers"][0]
    # A dbt node's pod is any task's pod: the agent, a read-only root, /tmp mounted.
    assert container["command"] == pods["after"]["spec"]["containers"][0]["command"]  # type: ignore[index]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "leoflow-tmp", "mountPath": "/tmp"} in [
        {k: m[k] for k in ("name", "mountPath")} for m in container["volumeMounts"]
    ]
    # What the agent in it ran is the spec's command and env, the same Lite runs.
    command = spec.tasks["dbt.stg_customers"].command
    assert command[:5] == ["leoflow", "dbt-task", "--task", "dbt.stg_customers", "--"]
    assert command[6:9] == ["run", "--select", "fqn:shop.staging.stg_customers"]
    env = spec.tasks["dbt.stg_customers"].env
    assert env["DBT_TARGET_PATH"] == "/tmp/leoflow-dbt/kube_dbt/dbt.stg_customers/target"
    assert Path(env["DBT_TARGET_PATH"], "run_results.json").is_file()  # noqa: ASYNC240
    assert query(database, "select count(*) from stg_customers") == [(3,)]
