"""PostgreSQL stopped for 20 s mid-run and started again (same data directory, same
address), under one and under two scheduler replicas on the fake apiserver, with real
agents in the pods: the leader keeps leading (its Lease does not depend on the
database) and no other replica takes office, the API answers 503 meanwhile, the
agents' calls wait instead of failing their tasks, and the run finishes with every
task launched exactly once."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.dagfolder import record_dag
from leoflow.settings import Settings, load_settings
from leoflow.store import Store
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.support.postgres import PgServer, start_postgres
from tests.support.proxy import CuttableProxy

from .conftest import RELEASE_NS, TASK_NS
from .test_failover import Node

pytestmark = pytest.mark.slow  # a PostgreSQL restart under a running DAG

OUTAGE = 20.0

DAG = """
dag_id: db_restart
tasks:
  a1: {command: "touch {marker}.a1; sleep 4; echo a1"}
  a2: {command: "touch {marker}.a2; sleep 4; echo a2"}
  a3: {command: "touch {marker}.a3; sleep 4; echo a3"}
  b: {command: "echo b", depends_on: [a1, a2, a3]}
"""


@pytest.fixture(autouse=True)
async def finalize_subprocess_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


@pytest.fixture(scope="module")
def restartable_postgres() -> Iterator[PgServer]:
    """A server of its own: stopping the session's would stop every other test's."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("replicas", [1, 2])
async def test_a_postgres_restart_mid_run_fails_nothing(
    replicas: int,
    restartable_postgres: PgServer,
    server: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if restartable_postgres._server is None:
        raise RuntimeError("this test stops the server: it needs the embedded one")
    url = await restartable_postgres.create_database()
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("LEOFLOW_AGENT_CONNECT_TIMEOUT", "120")
    (tmp_path / "secrets").mkdir()
    marker = tmp_path / "started"

    def settings_for() -> Settings:
        return load_settings(
            home=tmp_path / "home",
            database_url=url,
            secrets_dir=tmp_path / "secrets",
            scheduler_poll_interval=0.2,
            task_namespace=TASK_NS,
            release_namespace=RELEASE_NS,
            executor="kubernetes",
            token_signing_key="a-key-every-replica-shares-0123456789",
            agent_listen="127.0.0.1:0",
            # Generous: the claim is that a database outage does not move the Lease, and
            # a loop stalled by CPU contention past a tight renew deadline would.
            leader_election={"lease_duration": 8.0, "renew_deadline": 5.0, "retry_period": 0.5},
        )

    nodes = [Node(f"replica-{i}", settings_for()) for i in range(replicas)]
    service = CuttableProxy("127.0.0.1", 1)
    await service.start()
    address = f"127.0.0.1:{service.port}"
    seed = await Store.open(url)
    spec = parse_dag(DAG.replace("{marker}", str(marker)), tmp_path / "dag.yaml")
    await record_dag(seed, LoadedDag(spec, tmp_path / "dag.yaml", DAG))
    api_store = await Store.open(url, migrate=False)
    api_store.retry_window = 1.0
    api = create_app(api_store, settings_for(), auth=Auth.disabled())
    paused = False
    try:
        async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
            first = nodes[0]
            await first.start(address)
            await service.retarget("127.0.0.1", first.bound_port())
            for _ in range(600):
                if first.replica is not None and first.replica.current() is not None:
                    break
                await asyncio.sleep(0.05)
            assert first.replica is not None
            leader = first.replica.current()
            assert leader is not None
            for other in nodes[1:]:
                await other.start(address)
            epoch = await seed.current_epoch()
            row = await leader.trigger("db_restart")
            markers = [Path(f"{marker}.a{i}") for i in (1, 2, 3)]
            for _ in range(1200):
                if await asyncio.to_thread(lambda: all(m.exists() for m in markers)):
                    break
                await asyncio.sleep(0.05)

            # In a thread: pg_ctl waits, and the Lease renewals must go on meanwhile.
            await asyncio.to_thread(restartable_postgres.pause)  # the a* finish while it is down
            paused = True
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                answer = await c.get("/api/v1/dags")
            assert answer.status_code == 503, answer.text
            assert "the database is unavailable" in answer.json()["detail"], answer.text
            await asyncio.sleep(OUTAGE)
            await asyncio.to_thread(restartable_postgres.resume)
            paused = False

            current = None
            for _ in range(1200):
                current = await seed.get_run(row.pk)
                if current is not None and current.state in RUN_DONE:
                    break
                await asyncio.sleep(0.1)
            assert current is not None
            tis = {t.task_id: t for t in await seed.list_task_instances(run_pk=row.pk)}
            ends = {t: (ti.state, ti.try_number, ti.reason) for t, ti in tis.items()}
            assert current.state is RunState.SUCCESS, ends
            assert {t: (s, n) for t, (s, n, _) in ends.items()} == dict.fromkeys(
                ("a1", "a2", "a3", "b"), (TaskState.SUCCESS, 1)
            ), ends
            for task_id in ("a1", "a2", "a3", "b"):
                assert await seed.read_log(tis[task_id].pk, 1) == f"{task_id}\n".encode()
            # One pod per task, one leader throughout: nobody took office in between.
            assert server.counts[("create", "", "pods")] == 4
            assert await seed.current_epoch() == epoch
            lease = await first.client.get_lease("leoflow-scheduler") if first.client else None
            assert lease is not None and lease["spec"]["holderIdentity"] == first.name
            assert first.replica.current() is leader, "the leader kept leading"
    finally:
        if paused:
            await asyncio.to_thread(restartable_postgres.resume)
        for node in nodes:
            await node.close()
        await service.stop()
        await seed.close()
        await api_store.close()
        await restartable_postgres.drop_database(url)


RUN_DONE = (RunState.SUCCESS, RunState.FAILED)
