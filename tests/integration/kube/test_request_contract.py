"""The apiserver cost contract at a few hundred pods, with the real scheduler, the
Kubernetes executor, PostgreSQL and the agent endpoint (every pod's agent simulated
over gRPC by the fake kubelet): ONE list and ONE watch of pods for the whole run, a
re-list and a new watch only after a 410, exactly one create per task, and no
per-task GET or LIST. Not timed: ``benchmarks/bench_pro_scale.py`` has the figures."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.kube.client import KubeClient
from leoflow.runtime.dagfolder import record_dag
from leoflow.settings import Settings
from leoflow.store import Store
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome
from tests.support.pro_stack import chains_dag, pro_stack

from .conftest import RELEASE_NS, TASK_NS

pytestmark = pytest.mark.slow  # a few hundred pods through the whole Pro path

CHAINS, DEPTH = 30, 10  # 300 tasks; 270 of them launched when their upstream ends


def pod_requests(server: FakeApiServer) -> dict[str, int]:
    return {verb: n for (verb, group, resource), n in server.counts.items() if resource == "pods"}


async def run_contract_dag(
    server: FakeApiServer, postgres_url: str, tmp_path: Path, *, gone_midway: bool
) -> dict[str, int]:
    settings = Settings(
        home=tmp_path, secrets_dir=tmp_path, database_url=postgres_url, executor="kubernetes",
        task_namespace=TASK_NS, release_namespace=RELEASE_NS,
        token_signing_key="request-contract-key-0123456789abcdef",
        parallelism=1000, default_pool_slots=1000, kube_qps=1000.0, kube_burst=300,
        pod_gc_age=3600.0,
    )  # fmt: skip
    store = await Store.open(postgres_url)
    client = KubeClient(
        server.configuration(), task_namespace=TASK_NS, release_namespace=RELEASE_NS,
        qps=settings.kube_qps, burst=settings.kube_burst,
    )  # fmt: skip
    text = chains_dag("contract", CHAINS, DEPTH)
    await record_dag(store, LoadedDag(parse_dag(text, tmp_path / "d.yaml"), tmp_path, text))
    try:
        async with (
            FakeKubelet(server, default=Outcome.agent(), namespace=TASK_NS) as kubelet,
            pro_stack(settings, store, client) as stack,
        ):
            row = await stack.scheduler.trigger("contract")
            if gone_midway:
                # Half the tasks done, the watch ends and its resourceVersion is compacted
                # away: the one case that may list and watch again.
                await server.wait_for_pod(
                    TASK_NS, "", lambda _: kubelet.agents.completed >= CHAINS * DEPTH // 2, 120
                )
                server.store.next_rv()  # a write elsewhere moves the global revision on
                server.compact()
                server.drop_watches(abrupt=True)  # no bookmark can follow the compaction
            try:
                async with asyncio.timeout(90):  # under pytest's 120 s, to say what hangs
                    final = await stack.scheduler.wait_run(row.pk)
            except TimeoutError:
                raise AssertionError(await _stuck(store, row.pk, server, kubelet, stack)) from None
            assert final.state is RunState.SUCCESS, final
            tis = await store.list_task_instances(run_pk=row.pk)
            assert {t.state for t in tis} == {TaskState.SUCCESS}
            assert all(t.try_number == 1 for t in tis)
            assert not kubelet.agents.failed, kubelet.agents.failed[:3]
            # After a 410 the run can end before the cache's new watch is open (a busy
            # machine): wait for it, then there is exactly one.
            await server.wait_open_watches(1)
            assert server.open_watches == 1
    finally:
        await client.close()
        await store.close()
    assert len(server.pod_names(TASK_NS)) == CHAINS * DEPTH
    return pod_requests(server)


async def _stuck(
    store: Store, run_pk: int, server: FakeApiServer, kubelet: FakeKubelet, stack: Any
) -> str:
    """What a run that did not end was waiting for, as far as each part can tell."""
    tis = await store.list_task_instances(run_pk=run_pk)
    states = Counter(t.state.value for t in tis)
    pods = Counter(
        (p.get("status") or {}).get("phase", "?") for p in server.store.objects("pods", TASK_NS)
    )
    cache = stack.executor.cache
    return (
        f"the run did not end in 90 s: task states {dict(states)}, pod phases {dict(pods)}, "
        f"agents completed {kubelet.agents.completed} failed {kubelet.agents.failed[:3]}, "
        f"pod cache synced {cache.synced if cache else None} with {len(cache or ())} pods, "
        f"open watches {server.open_watches}, pod requests {pod_requests(server)}"
    )


async def test_one_list_one_watch_and_one_create_per_task(
    server: FakeApiServer, postgres_url: str, tmp_path: Path
) -> None:
    counts = await run_contract_dag(server, postgres_url, tmp_path, gone_midway=False)
    assert counts == {"list": 1, "watch": 1, "create": CHAINS * DEPTH}, counts


async def test_a_410_is_the_only_reason_to_list_and_watch_again(
    server: FakeApiServer, postgres_url: str, tmp_path: Path
) -> None:
    counts = await run_contract_dag(server, postgres_url, tmp_path, gone_midway=True)
    # The resumed watch got 410; the cache listed again and opened one more watch.
    assert counts == {"list": 2, "watch": 3, "create": CHAINS * DEPTH}, counts
