"""Pro: clearing a running task through a separate API (its own store connection, no
way to the scheduler or to Kubernetes) while a scheduler replica leads by Lease on
one PostgreSQL: the scheduler applies the recorded request, the cleared try's pod is
deleted, and the task runs again in the same run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.kube.client import KubeClient
from leoflow.kube.leader import ElectionConfig, LeaderElector
from leoflow.runtime.dagfolder import record_dag
from leoflow.runtime.parts import serve_agents
from leoflow.runtime.pro import SchedulerReplica
from leoflow.settings import Settings, load_settings
from leoflow.store import Store
from leoflow.store.clears import get_clear
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.integration.api.conftest import auth_header, make_auth
from tests.support.postgres import PgServer
from tests.support.waiting import until

from .conftest import RELEASE_NS, TASK_NS

pytestmark = pytest.mark.slow  # a leading replica, pods with real agents, PostgreSQL

DAG = """
dag_id: pro_clear
tasks:
  a: {command: "echo a"}
  b:
    depends_on: [a]
    command: >-
      echo "b try $LEOFLOW_TRY_NUMBER";
      if [ "$LEOFLOW_TRY_NUMBER" = 1 ]; then touch {marker}; sleep 120; echo slept; fi
  c: {command: "echo c", depends_on: [b]}
"""


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


def marker_exists(path: Path) -> bool:
    return path.exists()


async def test_clear_through_a_separate_api_deletes_the_pod_and_reruns(
    server: FakeApiServer,
    postgres_server: PgServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    (tmp_path / "secrets").mkdir()
    url = await postgres_server.create_database()
    marker = tmp_path / "b-started"
    settings: Settings = load_settings(
        home=tmp_path / "home",
        database_url=url,
        secrets_dir=tmp_path / "secrets",
        scheduler_poll_interval=0.2,
        task_namespace=TASK_NS,
        release_namespace=RELEASE_NS,
        executor="kubernetes",
        token_signing_key="a-key-every-replica-shares-0123456789",
        agent_listen="127.0.0.1:0",
        leader_election={"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.2},
    )
    scheduler_store = await Store.open(url)
    api_store = await Store.open(url)
    spec = parse_dag(DAG.replace("{marker}", str(marker)), tmp_path / "dag.yaml")
    await record_dag(api_store, LoadedDag(spec, tmp_path / "dag.yaml", DAG))
    replica = SchedulerReplica(settings, scheduler_store, "kubernetes")
    service = await serve_agents(settings, scheduler_store, replica.current)
    replica.agent_address = service.address
    client = await KubeClient.from_settings(settings)
    election = settings.leader_election
    elector = LeaderElector(
        client,
        ElectionConfig(
            election.lease_name,
            "replica-a",
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        ),
    )
    leading = asyncio.create_task(elector.run(replica.lead))
    # The API: its own connection, no callback into the scheduler (another process).
    app = create_app(api_store, settings, auth=make_auth())
    transport = httpx.ASGITransport(app=app)
    api = httpx.AsyncClient(transport=transport, base_url="http://localhost")
    op = auth_header("operator")
    try:
        async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):

            async def led() -> bool:
                return replica.current() is not None

            await until(led, "the replica to lead")
            made = await api.post("/api/v1/dags/pro_clear/runs", json={"run_id": "r1"}, headers=op)
            assert made.status_code in (200, 201), made.text
            run_pk = made.json()["pk"]

            async def b_running() -> bool:
                tis = {t.task_id: t for t in await api_store.list_task_instances(run_pk=run_pk)}
                return marker_exists(marker) and tis["b"].state is TaskState.RUNNING

            await until(b_running, "b's first try to run in its pod")
            b = next(
                t for t in await api_store.list_task_instances(run_pk=run_pk) if t.task_id == "b"
            )
            assert b.executor_ref is not None
            # executor_ref is "pod:<name>@<uid>"
            pod_name = b.executor_ref.removeprefix("pod:").partition("@")[0]
            assert server.pod(TASK_NS, pod_name) is not None
            deletes_before = server.counts[("delete", "", "pods")]

            cleared = await api.post(
                "/api/v1/dags/pro_clear/runs/r1/tasks/b/clear?downstream=true", headers=op
            )
            assert cleared.status_code == 202, cleared.text
            assert cleared.json()["cleared"] == ["b", "c"]

            async def ended() -> bool:
                run = await api_store.get_run(run_pk)
                return run is not None and run.state in (RunState.SUCCESS, RunState.FAILED)

            await until(ended, "the run to end")
            run = await api_store.get_run(run_pk)
            tis = {t.task_id: t for t in await api_store.list_task_instances(run_pk=run_pk)}
            summary = {t: (ti.state, ti.try_number) for t, ti in tis.items()}
            assert run is not None and run.state is RunState.SUCCESS, summary
            assert summary == {
                "a": (TaskState.SUCCESS, 1),  # finished upstream: untouched
                "b": (TaskState.SUCCESS, 2),  # cleared while running: ran again
                "c": (TaskState.SUCCESS, 1),
            }
            # The cleared try's pod was deleted through the executor's cancel path.
            assert server.counts[("delete", "", "pods")] > deletes_before

            async def pod_gone() -> bool:
                pod = server.pod(TASK_NS, pod_name)
                return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

            await until(pod_gone, "the cleared try's pod to be deleted")
            assert b"slept" not in await api_store.read_log(tis["b"].pk, 1)
            assert await api_store.read_log(tis["b"].pk, 2) == b"b try 2\n"
            request = await get_clear(api_store, cleared.json()["request_id"])
            assert request is not None and request.outcome == "cleared: b, c"
    finally:
        await api.aclose()
        leading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leading
        await service.close()
        await client.close()
        await scheduler_store.close()
        await api_store.close()
        await postgres_server.drop_database(url)
