"""A dbt DAG through Pro: ``leoflow dags apply`` (the real CLI, in its own process) to a
real API, the Pro scheduler (a leader-elected replica, its agent endpoint behind a
Service) launching the dbt nodes as pods on the fake apiserver, the fake kubelet
running each pod's real ``leoflow agent``, real dbt from ``.venv-dbt`` and DuckDB.

Then the same file through ``leoflow run --executor kubernetes``'s wiring: its pods and
the task specs their agents ran must be the Pro ones, field for field.
"""

from __future__ import annotations

import asyncio
import copy
import gc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.server import start_server
from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dbt.project import expander
from leoflow.domain.catalogue import parse_spec
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.kube.pod import LABEL_RUN, LABEL_TI, LABEL_TRY
from leoflow.runtime.lite import run_dag
from leoflow.settings import Settings, TaskPodSecurity, load_settings
from leoflow.store import Store
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.integration.api.conftest import auth_header, make_auth
from tests.integration.api.test_cli import cli
from tests.support.dbt import copy_project, dbt_bin, query
from tests.support.proxy import CuttableProxy

from .conftest import RELEASE_NS, TASK_NS, kube_lite_settings
from .test_failover import Node

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # runs dbt in pods, twice

DAG = """
dag_id: pro_dbt
tasks:
  after:
    command: ["sh", "-c", "echo customers are staged"]
    depends_on: [dbt.stg_customers]
dbt:
  project_dir: shop
  profiles_dir: profiles
  executable: {dbt}
  select: ["+stg_customers"]
  defaults:
    retries: 1
    env: {{SHOP_DUCKDB_PATH: "{database}"}}
    secrets: [warehouse_password]
"""
DBT_TASKS = {
    "dbt.raw_customers",
    "dbt.stg_customers",
    "dbt.test.not_null_stg_customers_customer_id",
    "dbt.test.unique_stg_customers_customer_id",
}
# Per try, not per DAG: the pod's own ticket and the address of whoever launched it.
_PER_TRY_ENV = {"LEOFLOW_AGENT_TICKET", "LEOFLOW_AGENT_ENDPOINT"}
_PER_TRY_LABELS = (LABEL_RUN, LABEL_TI, LABEL_TRY)


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


def _pod_shape(pod: dict[str, Any] | None) -> dict[str, Any]:
    """A pod with what differs per try (name, ticket, run id, node) taken out."""
    assert pod is not None
    spec = copy.deepcopy(pod["spec"])
    spec.pop("nodeName", None)
    for container in spec["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] not in _PER_TRY_ENV]
    labels = {k: v for k, v in pod["metadata"]["labels"].items() if k not in _PER_TRY_LABELS}
    return {"labels": labels, "spec": spec}


def _pods(server: FakeApiServer, tis: dict[str, TaskInstance]) -> dict[str, dict[str, Any]]:
    out = {}
    for task_id, ti in tis.items():
        name = (ti.executor_ref or "").removeprefix("pod:").split("@")[0]
        pod = server.pod(TASK_NS, name)
        assert pod is not None, (task_id, ti.executor_ref)
        out[task_id] = pod
    return out


def _pro_settings(tmp_path: Path, home: Path) -> Settings:
    return load_settings(
        home=home,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'pro.db'}",
        secrets_dir=tmp_path / "secrets",
        scheduler_poll_interval=0.2,
        task_namespace=TASK_NS,
        release_namespace=RELEASE_NS,
        executor="kubernetes",
        token_signing_key="a-key-every-replica-shares-0123456789",
        agent_listen="127.0.0.1:0",
        leader_election={"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.2},
        task_pod_security=TaskPodSecurity(read_only_root_filesystem=True),
    )


async def _finished(store: Store, run_pk: int) -> dict[str, TaskInstance]:
    for _ in range(6000):  # generous: four dbt start-ups on a loaded machine
        run = await store.get_run(run_pk)
        if run is not None and run.state in (RunState.SUCCESS, RunState.FAILED):
            break
        await asyncio.sleep(0.1)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run_pk)}
    assert run is not None and run.state is RunState.SUCCESS, {
        t: (i.state, i.reason, i.message) for t, i in tis.items()
    }
    return tis


async def test_a_dbt_dag_applied_to_the_api_runs_its_models_as_pods_like_leoflow_run(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    lite_settings = kube_lite_settings(
        server,
        tmp_path,
        monkeypatch,
        task_pod_security=TaskPodSecurity(read_only_root_filesystem=True),
    )
    assert lite_settings.home == home
    (tmp_path / "secrets" / "warehouse_password").write_text("s3cret")
    monkeypatch.setenv("LEOFLOW_AGENT_CONNECT_TIMEOUT", "120")
    copy_project(tmp_path, "shop")
    database = tmp_path / "shop.duckdb"
    path = tmp_path / "dag.yaml"
    path.write_text(DAG.format(dbt=dbt_bin(), database=database))
    settings = _pro_settings(tmp_path, home)

    # `leoflow dags apply` from the machine with the project, to the API.
    api_store = await Store.open(settings.resolved_database_url)
    api = await start_server(create_app(api_store, settings, auth=make_auth()), "127.0.0.1", 0)
    node = Node("replica-0", settings)
    service = CuttableProxy("127.0.0.1", 1)  # the scheduler's agent Service
    closed = False
    try:
        code, out, err = await cli(api, "dags", "apply", str(path), env={"LEOFLOW_HOME": str(home)})
        assert code == 0, err
        assert "pro_dbt: created (5 tasks, 4 from dbt project shop (manifest " in out, out
        async with httpx.AsyncClient(base_url=api.url, headers=auth_header("viewer")) as c:
            detail = (await c.get("/api/v1/dags/pro_dbt")).json()
        assert detail["dbt"]["nodes"] == 4 and set(detail["dbt"]["tasks"]) == DBT_TASKS
        assert detail["dbt"]["project_dir"] == str((tmp_path / "shop").resolve())

        async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
            await service.start()
            await node.start(f"127.0.0.1:{service.port}")
            await service.retarget("127.0.0.1", node.bound_port())
            async with httpx.AsyncClient(base_url=api.url, headers=auth_header("operator")) as c:
                answer = await c.post("/api/v1/dags/pro_dbt/runs", json={"run_id": "pro"})
            assert answer.status_code == 201, answer.text
            run_pk = answer.json()["pk"]
            pro_tis = await _finished(api_store, run_pk)
            assert {t: ti.state for t, ti in pro_tis.items()} == dict.fromkeys(
                {"after", *DBT_TASKS}, TaskState.SUCCESS
            )
            log = await api_store.read_log(pro_tis["dbt.stg_customers"].pk, 1)
            assert b"1 of 1 OK created sql view model main.stg_customers" in log, log[-2000:]
            pro_pods = _pods(server, pro_tis)
            row = await api_store.get_dag("pro_dbt")
            assert row is not None
            pro_spec = parse_spec(row.spec_json)
            await node.close()  # the scheduler stops before the kubelet does
            closed = True
    finally:
        if not closed:
            await node.close()
        await service.stop()
        await api.close()
        await api_store.close()
    assert query(database, "select count(*) from stg_customers") == [(3,)]

    # Models in dependency order: no pod before its upstreams' tasks finished.
    for task_id, ti in pro_tis.items():
        for upstream in pro_spec.tasks[task_id].depends_on:
            up = pro_tis[upstream]
            assert ti.started_at is not None and up.ended_at is not None
            assert ti.started_at >= up.ended_at, (task_id, upstream)

    # What the agent in a dbt pod ran: the dbt command, /tmp paths, the secret as env.
    stg = pro_spec.tasks["dbt.stg_customers"]
    assert stg.command[:5] == ["leoflow", "dbt-task", "--task", "dbt.stg_customers", "--"]
    assert stg.command[5:9] == [str(dbt_bin()), "run", "--select", "fqn:shop.staging.stg_customers"]
    assert stg.env["DBT_TARGET_PATH"] == "/tmp/leoflow-dbt/pro_dbt/dbt.stg_customers/target"
    assert stg.env["DBT_LOG_PATH"] == "/tmp/leoflow-dbt/pro_dbt/dbt.stg_customers/logs"
    assert stg.secrets == ("warehouse_password",)  # LEOFLOW_SECRET_WAREHOUSE_PASSWORD
    assert Path(stg.env["DBT_TARGET_PATH"], "run_results.json").is_file()  # noqa: ASYNC240
    # ... in a hardened pod, like any task's.
    pod = pro_pods["dbt.stg_customers"]
    container = pod["spec"]["containers"][0]
    assert container["command"] == pro_pods["after"]["spec"]["containers"][0]["command"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert {"name": "leoflow-tmp", "mountPath": "/tmp"} in [
        {k: m[k] for k in ("name", "mountPath")} for m in container["volumeMounts"]
    ]

    # The same file through `leoflow run --executor kubernetes` (its own store numbers
    # its task instances from 1 too, so the Pro pods' names must be free again).
    for pod in pro_pods.values():
        server.store.remove("pods", TASK_NS, pod["metadata"]["name"])
    options = LoadOptions(
        passthrough=lite_settings.task_pod_passthrough,
        dbt=expander(home / "dbt-cache", in_pods=True),
    )
    loaded = load_dag_file(path, options)
    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        final, runtime = await asyncio.wait_for(
            run_dag(lite_settings, loaded, executor_name="kubernetes"), 840
        )
        try:
            assert final.state is RunState.SUCCESS
            run_tis = {
                t.task_id: t for t in await runtime.store.list_task_instances(run_pk=final.pk)
            }
            run_pods = _pods(server, run_tis)
        finally:
            await runtime.close()
    assert loaded.spec.tasks == pro_spec.tasks  # what each agent was given to run
    assert set(run_pods) == set(pro_pods)
    for task_id in pro_pods:
        assert _pod_shape(run_pods[task_id]) == _pod_shape(pro_pods[task_id]), task_id
