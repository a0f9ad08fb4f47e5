"""A 40-task DAG (``retries: 0``) through the real scheduler, SQLite store and Kubernetes
executor while the fake apiserver refuses connections mid-run: the run succeeds, each
task has exactly one pod, nothing is judged lost, and ``why`` says the launch waits.

The 20 s outage runs with the default window (10 min) and retry cap (10 s). The 90 s
one runs at 1/6 scale (a 15 s outage, window 100 s, retry cap 10/6 s, pod_lost_grace
5 s): the same number of backoff steps and the same outage-to-window ratio, so the
same behaviour, in a sixth of the time (``benchmarks/bench_outage.py`` runs it at
full scale).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.domain.states import RunState, TaskState
from leoflow.kube.metrics import CALL_RETRIES
from leoflow.runtime.lite import run_dag
from leoflow.scheduler.core import Scheduler
from leoflow.settings import load_settings
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome

from .conftest import TASK_NS

pytestmark = pytest.mark.slow  # an apiserver outage under a running DAG

CREATE = ("create", "", "pods")


@pytest.fixture(autouse=True)
async def finalize_transports() -> AsyncIterator[None]:
    yield
    gc.collect()
    await asyncio.sleep(0)


def dag_yaml(extracts: int = 30, loads: int = 10) -> str:
    lines = ["dag_id: outage", "tasks:"]
    for i in range(extracts):
        lines += [f"  extract_{i}:", "    retries: 0", "    command: 'true'"]
    for j in range(loads):
        ups = ", ".join(f"extract_{(3 * j + k) % extracts}" for k in range(3))
        lines += [
            f"  load_{j}:",
            "    retries: 0",
            f"    depends_on: [{ups}]",
            "    command: 'true'",
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Scale:
    outage: float
    window: float = 600.0
    retry_cap: float = 10.0
    lost_grace: float = 30.0


async def run_through_outage(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scale: Scale
) -> dict[str, tuple[TaskState, int, str | None]]:
    """Run it; assert the outcome; return each task's (state, try, reason)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path / "kubeconfig")))
    (tmp_path / "secrets").mkdir()
    settings = load_settings(
        home=tmp_path / "home",
        secrets_dir=tmp_path / "secrets",
        scheduler_poll_interval=0.2,
        task_namespace=TASK_NS,
        executor="kubernetes",
        # Creates paced at 5/s so the outage starts while launches are under way.
        kube_qps=5.0,
        kube_burst=5,
        kube_outage_window=scale.window,
        kube_retry_cap=scale.retry_cap,
        pod_lost_grace=scale.lost_grace,
    )
    path = tmp_path / "dag.yaml"
    path.write_text(dag_yaml())
    loaded = load_dag_file(path, LoadOptions(passthrough=settings.task_pod_passthrough))
    retried_before = CALL_RETRIES.labels("create_pod", "unreachable")._value.get()
    schedulers: list[Scheduler] = []
    notes: list[str] = []

    async def outage() -> None:
        sub = server.store.subscribe("pods", TASK_NS)
        created = 0
        while created < 12:  # a dozen pods created, 28 launches to come
            event = await sub.queue.get()
            created += event is not None and event.type == "ADDED"
        server.store.unsubscribe(sub)
        await server.go_away("refuse")
        # While it is gone: the waiting launches say why, with the outage's start.
        async with asyncio.timeout(scale.outage):
            while not notes:
                scheduler = schedulers[0]
                for ti in list(scheduler._by_pk.values()):
                    why = scheduler.why(ti.pk)
                    if ti.state is TaskState.QUEUED and why and "apiserver unreachable" in why:
                        notes.append(why)
                await asyncio.sleep(0.1)
        await asyncio.sleep(max(0.0, scale.outage - 1.0))
        await server.come_back()

    async with FakeKubelet(server, default=Outcome.succeed(after=0.5), namespace=TASK_NS):
        breaker = asyncio.create_task(outage())
        final, runtime = await asyncio.wait_for(
            run_dag(
                settings,
                loaded,
                executor_name="kubernetes",
                watch=lambda rt: schedulers.append(rt.scheduler),
            ),
            scale.outage + 240,
        )
        await breaker
        try:
            tis = await runtime.store.list_task_instances(run_pk=final.pk)
            ends = {ti.task_id: (ti.state, ti.try_number, ti.reason) for ti in tis}
            assert final.state is RunState.SUCCESS, ends
            assert all(e == (TaskState.SUCCESS, 1, "success") for e in ends.values()), ends
            assert len(ends) == 40
        finally:
            await runtime.close()
    assert notes and "apiserver unreachable since" in notes[0] and "retrying" in notes[0], notes
    # Exactly one pod per task: every retried create was of the same, deterministic name.
    assert len(server.pod_names(TASK_NS)) == 40
    assert server.counts[CREATE] == 40, "refused creates never reached it; none failed after"
    retried = CALL_RETRIES.labels("create_pod", "unreachable")._value.get() - retried_before
    assert retried >= 10, f"only {retried} creates were refused and tried again"
    return ends


async def test_a_20s_apiserver_outage_fails_nothing(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_through_outage(server, tmp_path, monkeypatch, Scale(outage=20.0))


async def test_a_90s_apiserver_outage_at_one_sixth_scale_fails_nothing(
    server: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_through_outage(
        server,
        tmp_path,
        monkeypatch,
        Scale(outage=15.0, window=100.0, retry_cap=10.0 / 6, lost_grace=5.0),
    )
