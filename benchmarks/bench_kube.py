"""Kubernetes executor benchmarks against the fake apiserver; prints one JSON document.

    .venv/bin/python benchmarks/bench_kube.py [--sizes 10,100,1000] [--period 20]
        [--events 50000] [--cache-pods 10000] [--launch 200]

Figures:
- ``steady_state``: apiserver requests per second by verb while N tasks run (pods
  created and held Running by the fake kubelet) for ``--period`` seconds, with the
  executor's reaper, GC and pod cache live — against ADR 0054 §4's polling design,
  which issued one namespace LIST per running task per second;
- ``pod_cache``: bytes per cached pod (tracemalloc) and watch events processed per
  second through the raw-JSON parsing path, next to kubernetes_asyncio's model
  deserialisation of the same pods;
- ``launch``: pods created per second through the token bucket (settings' QPS and
  burst) and with the bucket off.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes_asyncio.client import ApiClient  # noqa: E402

from leoflow.domain.dag import TaskSpec  # noqa: E402
from leoflow.domain.execution import ExecutorEvent, Launch  # noqa: E402
from leoflow.kube.client import KubeClient  # noqa: E402
from leoflow.kube.executor import KubernetesExecutor  # noqa: E402
from leoflow.kube.podcache import PodCache  # noqa: E402
from leoflow.settings import Settings  # noqa: E402
from tests.fakekube import FakeApiServer, FakeKubelet, Outcome  # noqa: E402

NS = "leoflow-tasks"
VERBS = ("list", "watch", "get", "create", "delete")


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "task_namespace": NS,
        "agent_endpoint": "leoflow-scheduler.leoflow-system.svc:7070",
    }
    values.update(overrides)
    return Settings(**values)


def launch(ti_pk: int) -> Launch:
    return Launch(
        ti_pk=ti_pk,
        try_number=1,
        dag_id="nightly_sales",
        run_id="scheduled__2026-11-30T03:00:00+00:00",
        task_id=f"extract_{ti_pk % 7}",
        spec=TaskSpec(
            task_id=f"extract_{ti_pk % 7}",
            command=["true"],
            resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        ),
        ticket=f"lft_{uuid.uuid4().hex}",
    )


def ignore(_: ExecutorEvent) -> None:
    pass


async def running_count(ex: KubernetesExecutor) -> int:
    assert ex.cache is not None
    return sum(1 for r in ex.cache.pods() if r.phase == "Running")


async def steady_state(n: int, period: float) -> dict[str, Any]:
    async with FakeApiServer(restricted_namespaces=[NS]) as srv:
        kube = KubeClient(
            srv.configuration(), task_namespace=NS, release_namespace="x", rate_limit=False
        )
        ex = KubernetesExecutor(settings(), client=kube)
        await ex.start(ignore)
        assert ex.cache is not None
        await ex.cache.wait_synced(timeout=30)
        async with FakeKubelet(srv, default=Outcome.succeed(after=3600), namespace=NS):
            await asyncio.gather(*(ex.launch(launch(i)) for i in range(1, n + 1)))
            ready = asyncio.Event()
            cache = ex.cache
            running: set[str] = {r.name for r in cache.pods() if r.phase == "Running"}

            def check(_old: Any, new: Any) -> None:
                if new is not None and new.phase == "Running":
                    running.add(new.name)
                if len(running) >= n:
                    ready.set()

            cache.add_listener(check)
            check(None, None)
            await asyncio.wait_for(ready.wait(), 120)
            srv.reset_counts()
            started = time.perf_counter()
            await asyncio.sleep(period)
            elapsed = time.perf_counter() - started
            counts = {verb: srv.counts[(verb, "", "pods")] for verb in VERBS}
            open_watches = srv.open_watches
            in_cache = await running_count(ex)
        await ex.stop()
        await kube.close()
    return {
        "running_tasks": n,
        "running_pods_seen_in_cache": in_cache,
        "period_s": round(elapsed, 2),
        "requests": counts,
        "per_second": {verb: round(c / elapsed, 3) for verb, c in counts.items()},
        "open_watches": open_watches,
        "polling_design_list_per_s": n,  # ADR 0054 §4: one LIST per running task per second
    }


def sample_pods(n: int, template: dict[str, Any]) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"lf-nightly-sales-extract-{i}-1"
        pod["metadata"]["uid"] = str(uuid.uuid4())
        pod["metadata"]["labels"]["leoflow.io/ti"] = str(i)
        pod["metadata"]["resourceVersion"] = str(1000 + i)
        pods.append(pod)
    return pods


async def running_pod_template() -> dict[str, Any]:
    """A pod exactly as the apiserver serves it once Running (defaults, status, fields)."""
    async with FakeApiServer() as srv:
        kube = KubeClient(srv.configuration(), task_namespace=NS, release_namespace="x")
        from leoflow.kube.pod import build_pod

        body = build_pod(launch(1), settings(), agent_endpoint="scheduler:7070")
        async with FakeKubelet(srv, default=Outcome.succeed(after=3600)):
            await kube.create_pod(body)
            pod = await srv.wait_for_pod(
                NS,
                body["metadata"]["name"],
                lambda p: p is not None and p["status"].get("phase") == "Running",
            )
        await kube.close()
    assert pod is not None
    return pod


def model_deserializer() -> Any:
    """What kubernetes_asyncio does with a pod when content is preloaded: build V1Pod."""
    api: Any = ApiClient()
    return api._ApiClient__deserialize


def cache_memory(pods: list[dict[str, Any]]) -> dict[str, Any]:
    lines = [json.dumps({"type": "ADDED", "object": p}).encode() for p in pods]
    cache = PodCache(None)  # type: ignore[arg-type]  # fed by hand: no client needed
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for line in lines:
        cache.feed_line(line)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    slim = sum(s.size_diff for s in after.compare_to(before, "filename"))
    del cache

    deserialize = model_deserializer()
    models: list[Any] = []
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for line in lines:
        models.append(deserialize(json.loads(line)["object"], "V1Pod"))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    full = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return {
        "pods": len(pods),
        "pod_json_bytes": len(lines[0]),
        "bytes_per_cached_pod": round(slim / len(pods)),
        "bytes_per_pod_as_client_model": round(full / len(pods)),
    }


def event_rate(template: dict[str, Any], events: int) -> dict[str, Any]:
    pods = sample_pods(1000, template)
    lines = []
    for i in range(events):
        pod = pods[i % len(pods)]
        pod["metadata"]["resourceVersion"] = str(5000 + i)
        # Each event really changes something, as kubelet status updates do.
        pod["status"]["phase"] = "Running" if (i // len(pods)) % 2 == 0 else "Pending"
        lines.append(json.dumps({"type": "MODIFIED", "object": pod}).encode())
    cache = PodCache(None)  # type: ignore[arg-type]
    changes = 0

    def count(_old: Any, _new: Any) -> None:
        nonlocal changes
        changes += 1

    cache.add_listener(count)
    started = time.perf_counter()
    for line in lines:
        cache.feed_line(line)
    slim_s = time.perf_counter() - started

    deserialize = model_deserializer()
    sample = lines[: min(len(lines), 10000)]
    started = time.perf_counter()
    for line in sample:
        deserialize(json.loads(line)["object"], "V1Pod")
    model_s = time.perf_counter() - started
    return {
        "events": events,
        "changes_emitted": changes,
        "events_per_s_raw_json": round(events / slim_s),
        "events_per_s_client_models": round(len(sample) / model_s),
    }


async def launch_rate(n: int, rate_limit: bool) -> dict[str, Any]:
    s = settings()
    async with FakeApiServer(restricted_namespaces=[NS]) as srv:
        kube = KubeClient(
            srv.configuration(),
            task_namespace=NS,
            release_namespace="x",
            qps=s.kube_qps,
            burst=s.kube_burst,
            rate_limit=rate_limit,
        )
        ex = KubernetesExecutor(s, client=kube)
        await ex.start(ignore)
        assert ex.cache is not None
        await ex.cache.wait_synced(timeout=30)
        started = time.perf_counter()
        await asyncio.gather(*(ex.launch(launch(i)) for i in range(1, n + 1)))
        elapsed = time.perf_counter() - started
        created = srv.counts[("create", "", "pods")]
        # The DAG's GC anchor: one create for the DAG, whatever the number of pods.
        anchor_calls = sum(n for (_, _, r), n in srv.counts.items() if r == "configmaps")
        await ex.stop()
        await kube.close()
    return {
        "pods": n,
        "token_bucket": {"qps": s.kube_qps, "burst": s.kube_burst} if rate_limit else "off",
        "creates": created,
        "anchor_calls": anchor_calls,
        "seconds": round(elapsed, 3),
        "pods_per_s": round(n / elapsed, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(x) for x in args.sizes.split(",") if x]
    result: dict[str, Any] = {"steady_state": []}
    for n in sizes:
        figure = await steady_state(n, args.period)
        print(json.dumps(figure), file=sys.stderr)
        result["steady_state"].append(figure)
    template = await running_pod_template()
    result["pod_cache"] = {
        **cache_memory(sample_pods(args.cache_pods, template)),
        **event_rate(template, args.events),
    }
    print(json.dumps(result["pod_cache"]), file=sys.stderr)
    result["launch"] = [
        await launch_rate(args.launch, rate_limit=True),
        await launch_rate(args.launch, rate_limit=False),
    ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--period", type=float, default=20.0)
    parser.add_argument("--events", type=int, default=50000)
    parser.add_argument("--cache-pods", type=int, default=10000)
    parser.add_argument("--launch", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
