"""Two scheduler replicas over one store and one (fake) apiserver: the leader dies
mid-run, the other takes over, adopts the running pod, and nothing runs twice."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.kube.client import KubeClient
from leoflow.kube.leader import ElectionConfig, LeaderElector
from leoflow.runtime.dagfolder import record_dag
from leoflow.runtime.parts import serve_agents
from leoflow.runtime.pro import SchedulerReplica
from leoflow.scheduler.agent_service import AgentService
from leoflow.settings import Settings, load_settings
from leoflow.store import Store
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.support.proxy import CuttableProxy

from .conftest import RELEASE_NS, TASK_NS

pytestmark = pytest.mark.slow  # scheduler replicas failing over, real agents

DAG = """
dag_id: failover
tasks:
  first: {command: "echo first"}
  middle: {command: "touch {marker}; sleep 3; echo middle", depends_on: [first]}
  last: {command: "echo last", depends_on: [middle]}
"""


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


class Node:
    """What one `leoflow scheduler` process holds."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.name = name
        self.settings = settings
        self.store: Store | None = None
        self.service: AgentService | None = None
        self.replica: SchedulerReplica | None = None
        self.client: KubeClient | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self, service_address: str) -> None:
        self.store = await Store.open(self.settings.resolved_database_url)
        self.replica = SchedulerReplica(self.settings, self.store, "kubernetes")
        self.replica.identity = self.name
        self.service = await serve_agents(self.settings, self.store, self.replica.current)
        self.replica.agent_address = service_address  # pods dial the Service, not a replica
        self.client = await KubeClient.from_settings(self.settings)
        election = self.settings.leader_election
        elector = LeaderElector(
            self.client,
            ElectionConfig(
                election.lease_name,
                self.name,
                lease_duration=election.lease_duration,
                renew_deadline=election.renew_deadline,
                retry_period=election.retry_period,
            ),
        )
        self.task = asyncio.create_task(elector.run(self.replica.lead))

    def bound_port(self) -> int:
        assert self.service is not None
        return int(self.service.address.rpartition(":")[2])

    async def crash(self) -> None:
        """kill -9: everything stops, nothing is released or cleaned up politely."""
        assert self.task is not None and self.service is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.service.close()

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            await self.crash()
        if self.client is not None:
            await self.client.close()
        if self.store is not None:
            await self.store.close()


WARM = "kubernetes:\n  reuse_pods: {max_pods: 1, idle_timeout: 60s}\n"


@pytest.mark.parametrize("warm", [False, True], ids=["pod-per-try", "warm-pods"])
async def test_the_new_leader_adopts_the_running_pod_and_finishes_the_run(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """With warm pods: the new leader adopts the try running in the warm pod (it is
    not run again), and the same pod, now talking to the new leader, or a new one, runs
    what follows."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("LEOFLOW_AGENT_CONNECT_TIMEOUT", "60")
    (tmp_path / "secrets").mkdir()
    marker = tmp_path / "middle-started"

    def settings_for() -> Settings:
        return load_settings(
            home=tmp_path / "home",
            secrets_dir=tmp_path / "secrets",
            scheduler_poll_interval=0.2,
            task_namespace=TASK_NS,
            release_namespace=RELEASE_NS,
            executor="kubernetes",
            token_signing_key="a-key-every-replica-shares-0123456789",
            agent_listen="127.0.0.1:0",
            # Long enough that a loaded machine's stalls do not cost a live leader its
            # lease (a lost and retaken lease is another epoch, fenced but noisy here).
            leader_election={"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 0.2},
        )

    a, b = Node("replica-a", settings_for()), Node("replica-b", settings_for())
    service = CuttableProxy("127.0.0.1", 1)  # the scheduler's gRPC Service
    await service.start()
    service_address = f"127.0.0.1:{service.port}"
    seed = await Store.open(settings_for().resolved_database_url)
    text = DAG.replace("{marker}", str(marker))
    if warm:
        text = text.replace("tasks:\n", WARM + "tasks:\n", 1)
    spec = parse_dag(text, tmp_path / "dag.yaml")
    await record_dag(seed, LoadedDag(spec, tmp_path / "dag.yaml", DAG))
    try:
        async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
            await a.start(service_address)
            await service.retarget("127.0.0.1", a.bound_port())
            for _ in range(200):
                if a.replica and a.replica.current() is not None:
                    break
                await asyncio.sleep(0.05)
            leader = a.replica.current() if a.replica else None
            assert leader is not None, "replica a never led"
            await b.start(service_address)
            row = await leader.trigger("failover")
            for _ in range(600):
                if marker.exists():
                    break
                await asyncio.sleep(0.05)
            assert marker.exists(), [
                (t.task_id, t.state, t.try_number, t.reason, t.message)
                for t in await seed.list_task_instances(run_pk=row.pk)
            ]

            await a.crash()
            await service.retarget("127.0.0.1", b.bound_port())

            final = None
            for _ in range(600):
                current = await seed.get_run(row.pk)
                if current is not None and current.state in (RunState.SUCCESS, RunState.FAILED):
                    final = current
                    break
                await asyncio.sleep(0.05)
            tis_now = await seed.list_task_instances(run_pk=row.pk)
            assert final is not None and final.state is RunState.SUCCESS, [
                (t.task_id, t.state, t.try_number, t.reason, t.message) for t in tis_now
            ]
            tis = {t.task_id: t for t in await seed.list_task_instances(run_pk=row.pk)}
            assert {t: (ti.state, ti.try_number) for t, ti in tis.items()} == {
                "first": (TaskState.SUCCESS, 1),
                "middle": (TaskState.SUCCESS, 1),  # adopted, not launched again
                "last": (TaskState.SUCCESS, 1),
            }
            # One pod per try, ever: a second launch would have been a second create.
            # (Warm pods: how many the new leader makes depends on when the adopted pod
            # asks it for work; that no try ran twice is the point.)
            if not warm:
                assert server.counts[("create", "", "pods")] == 3
            assert (";warm=" in (tis["middle"].executor_ref or "")) is warm
            assert await seed.read_log(tis["middle"].pk, 1) == b"middle\n"
            lease = await b.client.get_lease("leoflow-scheduler") if b.client else None
            assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
            # a then b took office (a's writes stopped); a stall may add a retaken term.
            assert await seed.current_epoch() >= 2
    finally:
        await a.close()
        await b.close()
        await service.stop()
        await seed.close()
