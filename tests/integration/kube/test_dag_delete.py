"""`leoflow dags delete` on the Kubernetes executor: the CLI asks the API, the API records
the deletion, the scheduler deletes the DAG's GC anchor and the (fake) cluster's
garbage collector its pods; another DAG's pods and anchor stay. Real CLI subprocesses,
a real API server, scheduler, agents (the fake kubelet runs each pod's agent)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.api.app import create_app
from leoflow.api.server import RunningApi, start_server
from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState
from leoflow.kube.dag_anchor import anchor_name
from leoflow.runtime.assembly import Runtime, open_runtime
from leoflow.runtime.dagfolder import record_dag
from tests.fakekube import FakeApiServer, FakeKubelet
from tests.integration.api.conftest import make_auth
from tests.integration.api.test_cli import cli

from .conftest import TASK_NS, kube_lite_settings
from .test_e2e_trigger_rules import finalize_subprocess_transports  # noqa: F401 - autouse

pytestmark = pytest.mark.slow  # the real CLI in subprocesses, pods with real agents

DAG = """
dag_id: {dag_id}
tasks:
  one:
    command: ["sh", "-c", "echo one"]
  two:
    depends_on: [one]
    command: ["sh", "-c", "echo two"]
"""


@pytest.fixture
async def runtime(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    # Finished pods stay (no age GC in this test): only the anchor's deletion removes them.
    # A removed DAG file's grace is 0: its anchor goes as soon as no run of it is live.
    settings = kube_lite_settings(
        server, tmp_path, monkeypatch, pod_gc_age=3600.0, removed_dag_grace=0.0
    )
    async with FakeKubelet(server, run_commands=True, namespace=TASK_NS):
        opened = await open_runtime(settings, "kubernetes")
        try:
            await opened.scheduler.start()
            yield opened
        finally:
            await opened.close()


@pytest.fixture
async def live(runtime: Runtime) -> AsyncIterator[RunningApi]:
    app = create_app(runtime.store, runtime.settings, auth=make_auth())
    running = await start_server(app, "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


def _pods_of(server: FakeApiServer, dag_id: str) -> list[str]:
    return [n for n in server.pod_names(TASK_NS) if n.startswith(f"lf-{dag_id}-")]


async def _gone_but_kept(server: FakeApiServer, dag_id: str) -> None:
    """Waits until ``dag_id``'s anchor and pods are gone; DAG kept's are all there."""
    await server.wait_until(
        lambda: (
            not _pods_of(server, dag_id)
            and server.store.get("configmaps", TASK_NS, anchor_name(dag_id)) is None
        ),
        timeout=30,
    )
    assert len(_pods_of(server, "kept")) == 2
    assert server.store.get("configmaps", TASK_NS, anchor_name("kept")) is not None


async def _run(
    live: RunningApi, runtime: Runtime, tmp_path: Path, dag_id: str, *, folder: bool = False
) -> None:
    path = tmp_path / f"{dag_id}.yaml"
    path.write_text(DAG.format(dag_id=dag_id))
    if folder:  # as the scheduler's DAG folder pass records it
        await record_dag(runtime.store, load_dag_file(path, LoadOptions()))
    else:
        code, _, err = await cli(live, "dags", "apply", str(path))
        assert code == 0, err
    code, _, err = await cli(live, "trigger", dag_id, "--run-id", "r1", role="operator")
    assert code == 0, err
    run = await runtime.store.find_run(dag_id, "r1")
    assert run is not None
    async with asyncio.timeout(90):
        ended = await runtime.scheduler.wait_run(run.pk)
    assert ended.state is RunState.SUCCESS, ended


async def test_dags_delete_deletes_the_anchor_and_its_pods(
    server: FakeApiServer, runtime: Runtime, live: RunningApi, tmp_path: Path
) -> None:
    await _run(live, runtime, tmp_path, "doomed")
    await _run(live, runtime, tmp_path, "kept")
    assert len(_pods_of(server, "doomed")) == 2 and len(_pods_of(server, "kept")) == 2
    assert server.counts[("create", "", "configmaps")] == 2  # once per DAG, not per pod

    code, out, err = await cli(live, "dags", "delete", "doomed")
    assert (code, err) == (0, "")
    assert out.startswith("doomed: deleted")
    await _gone_but_kept(server, "doomed")
    assert await runtime.store.get_dag("doomed") is None
    code, _, err = await cli(live, "dags", "delete", "doomed")
    assert code == 1 and "404" in err
    assert {k for k in server.counts if k[0] == "watch"} == {("watch", "", "pods")}


async def test_a_removed_dag_file_deletes_the_anchor_and_its_pods(
    server: FakeApiServer, runtime: Runtime, live: RunningApi, tmp_path: Path
) -> None:
    await _run(live, runtime, tmp_path, "filed", folder=True)
    await _run(live, runtime, tmp_path, "kept")
    assert len(_pods_of(server, "filed")) == 2
    # Its file is still in the folder: deleting it would only see it loaded again.
    code, _, err = await cli(live, "dags", "delete", "filed")
    assert code == 1 and "409" in err and "remove the file" in err
    assert server.store.get("configmaps", TASK_NS, anchor_name("filed")) is not None

    # The folder pass after the file was removed: the DAG turns inactive.
    await runtime.store.deactivate_dags_except(["kept"])
    runtime.scheduler.wake()
    await _gone_but_kept(server, "filed")


async def test_a_removed_dag_files_anchor_stays_while_a_run_of_it_is_live(
    server: FakeApiServer, runtime: Runtime, live: RunningApi, tmp_path: Path
) -> None:
    path = tmp_path / "waits.yaml"
    # The run stays live with no try in flight: its first try failed, the retry is an
    # hour away. The failed try's pod is kept (pod_gc_age) and owned by the anchor.
    path.write_text(
        "dag_id: waits\ntasks:\n  flaky:\n    retries: 1\n    retry_delay: 1h\n"
        '    command: ["sh", "-c", "exit 3"]\n'
    )
    await record_dag(runtime.store, load_dag_file(path, LoadOptions()))
    code, _, err = await cli(live, "trigger", "waits", "--run-id", "r1", role="operator")
    assert code == 0, err
    (pod,) = await _pods_when(server, "waits")
    await server.wait_for_pod(
        TASK_NS, pod, lambda p: p is not None and p["status"].get("phase") == "Failed"
    )
    await runtime.store.deactivate_dags_except([])  # its file left the folder
    runtime.scheduler.wake()
    # A whole run of another DAG later (many scheduler polls, each telling the executor
    # which DAGs to keep, with a grace of 0), the live run's pod and anchor are still there.
    await _run(live, runtime, tmp_path, "kept")
    assert server.store.get("configmaps", TASK_NS, anchor_name("waits")) is not None
    assert _pods_of(server, "waits") == [pod]

    # The run ends: now nothing keeps the removed DAG's anchor, nor its pod.
    code, _, err = await cli(live, "cancel", "waits", "r1", role="operator")
    assert code == 0, err
    await server.wait_until(
        lambda: (
            server.store.get("configmaps", TASK_NS, anchor_name("waits")) is None
            and not _pods_of(server, "waits")
        ),
        timeout=30,
    )


async def _pods_when(server: FakeApiServer, dag_id: str) -> list[str]:
    await server.wait_until(lambda: bool(_pods_of(server, dag_id)), timeout=60)
    return _pods_of(server, dag_id)
