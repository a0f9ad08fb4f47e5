"""Pro at scale: the real scheduler, Kubernetes executor, PostgreSQL and agent endpoint
against the fake apiserver over HTTP; prints one JSON document.

    .venv/bin/python benchmarks/bench_pro_scale.py [--repeat 5] [--tasks 1000]
        [--chains 100] [--qps 200] [--burst 100] [--out FILE] [--asyncio]

Each repeat starts a fresh fake cluster (``pro_scale_cluster.py``, its own process:
apiserver and kubelet; every pod's agent simulated over gRPC in a third process,
``pro_scale_agents.py`` — see ``tests/fakekube/agents.py`` for why not real
``leoflow agent`` processes) and a fresh
database on one embedded PostgreSQL, then runs two DAGs through one scheduler:

- ``fanout``: ``--tasks`` independent tasks; the agents are held after Start until
  every pod is Running at once, then released. Figures: pods Running at once, the
  create rate after the burst against the bucket's rate, time to create them all
  against the bucket's minimum.
- ``chains``: ``--tasks`` tasks as ``--chains`` chains (each task depends on the one
  before it). Figures: makespan (trigger → run terminal) minus the bucket's minimum
  ``(tasks - burst) / qps`` = the total scheduling overhead; and for each of the
  ``tasks - chains`` edges the lag from the upstream's end (``ended_at`` as the
  scheduler recorded it) to the downstream pod's creation (as the fake recorded it,
  to the microsecond), less the time that create waited in the token bucket.

And for the whole repeat: the fake's requests by verb (one LIST, one WATCH, creates ==
tasks, no GET) and the scheduler process's CPU time per task.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import cProfile
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leoflow.commands.common import run_async  # noqa: E402
from leoflow.dagfile.loader import LoadedDag, parse_dag  # noqa: E402
from leoflow.kube.client import KubeClient  # noqa: E402
from leoflow.kube.objects import JsonObj  # noqa: E402
from leoflow.kube.token_bucket import TokenBucket  # noqa: E402
from leoflow.runtime.dagfolder import record_dag  # noqa: E402
from leoflow.scheduler.core import Scheduler  # noqa: E402
from leoflow.settings import Settings  # noqa: E402
from leoflow.store import Store  # noqa: E402
from tests.support.postgres import PgServer, start_postgres  # noqa: E402
from tests.support.pro_stack import chains_dag, pro_stack  # noqa: E402

NS = "leoflow-tasks"
CLUSTER = Path(__file__).resolve().parent / "pro_scale_cluster.py"
_POD: contextvars.ContextVar[str | None] = contextvars.ContextVar("pod", default=None)


class TimedBucket(TokenBucket):
    """The client's own bucket, noting how long each pod create waited in it."""

    def __init__(self, rate: float, burst: int) -> None:
        super().__init__(rate, burst)
        self.waits: dict[str, float] = {}

    async def take(self) -> None:
        started = time.perf_counter()
        await super().take()
        pod = _POD.get()
        if pod is not None:
            self.waits[pod] = time.perf_counter() - started


class TimedClient(KubeClient):
    """Notes when each pod's create was called (before the bucket)."""

    called: dict[str, float]

    async def create_pod(self, body: JsonObj) -> JsonObj:
        name = body["metadata"]["name"]
        self.called[name] = time.time()
        _POD.set(name)  # this launch's own task context
        return await super().create_pod(body)


class Cluster:
    """The fake cluster's process and its JSON-lines conversation."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls) -> Cluster:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(CLUSTER), cwd=REPO,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        assert proc.stdout is not None
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        return cls(proc, first["url"])

    async def ask(self, op: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op}).encode() + b"\n")
        await self.proc.stdin.drain()
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(self.proc.stdout.readline(), 60))
        return answer

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b'{"op": "quit"}\n')
            await self.proc.stdin.drain()
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def fanout_dag(n: int) -> str:
    lines = [f"dag_id: pro_fanout\nmax_active_tasks: {n}\ntasks:"]
    lines += [f"  t{i:04d}: {{command: 'true'}}" for i in range(n)]
    return "\n".join(lines) + "\n"


def make_settings(args: argparse.Namespace, url: str, home: Path) -> Settings:
    return Settings(
        home=home,
        secrets_dir=home,
        database_url=url,
        executor="kubernetes",
        task_namespace=NS,
        token_signing_key="pro-scale-benchmark-key-0123456789abcdef",
        agent_listen="127.0.0.1:0",
        parallelism=args.tasks * 2,
        default_pool_slots=args.tasks * 2,
        kube_qps=args.qps,
        kube_burst=args.burst,
        pod_gc_age=3600.0,  # GC deletes would share the bucket with the creates
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(x: float) -> float:
    return round(x * 1000, 2)


async def wait_running(cluster: Cluster, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = int((await cluster.ask("running"))["running"])
        if seen >= n:
            return seen
        await asyncio.sleep(0.1)
    return seen


async def one_repeat(args: argparse.Namespace, pg: PgServer) -> dict[str, Any]:
    cluster = await Cluster.start()
    url = await pg.create_database()
    home = Path(tempfile.mkdtemp(prefix="leoflow-pro-scale-"))
    settings = make_settings(args, url, home)
    store = await Store.open(url)
    from kubernetes_asyncio.client import Configuration

    client = TimedClient(
        Configuration(host=cluster.url), task_namespace=NS,
        release_namespace=settings.release_namespace, qps=args.qps, burst=args.burst,
    )  # fmt: skip
    bucket = TimedBucket(args.qps, args.burst)
    client.bucket = bucket
    client.called = {}
    try:
        for text in (
            fanout_dag(args.tasks),
            chains_dag("pro_chains", args.chains, args.tasks // args.chains),
        ):
            spec = parse_dag(text, home / "dag.yaml")
            await record_dag(store, LoadedDag(spec, home / f"{spec.dag_id}.yaml", text))
        async with pro_stack(settings, store, client) as stack:
            return await measure(args, cluster, store, stack.scheduler, client)
    finally:
        await client.close()
        await store.close()
        await cluster.stop()
        await pg.drop_database(url)


async def measure(
    args: argparse.Namespace,
    cluster: Cluster,
    store: Store,
    scheduler: Scheduler,
    client: TimedClient,
) -> dict[str, Any]:
    assert isinstance(client.bucket, TimedBucket)
    bucket = client.bucket
    # ---- fanout: every pod Running at once
    await cluster.ask("hold")
    cpu0, t0 = time.process_time(), time.time()
    row = await scheduler.trigger("pro_fanout")
    running = await wait_running(cluster, args.tasks, 120)
    t_running = time.time()
    await cluster.ask("release")
    await asyncio.wait_for(scheduler.wait_run(row.pk), 120)
    fan_cpu, fan_s = time.process_time() - cpu0, time.time() - t0
    fan_stats = await cluster.ask("stats")
    fan_created = sorted(fan_stats["created_at"].values())
    after_burst = fan_created[args.burst :]
    fanout = {
        "pods_running_at_once": running,
        "create_rate_after_burst_per_s": round(
            (len(after_burst) - 1) / (after_burst[-1] - after_burst[0]), 1
        ),
        "bucket_rate_per_s": args.qps,
        "all_created_s": round(fan_created[-1] - t0, 3),
        "all_running_s": round(t_running - t0, 3),
        "bucket_minimum_s": round((args.tasks - args.burst) / args.qps, 3),
        "makespan_s": round(fan_s, 3),
        "scheduler_cpu_ms_per_task": round(fan_cpu * 1000 / args.tasks, 3),
    }

    # ---- chains: makespan and upstream → downstream lag
    await asyncio.sleep(args.burst / args.qps + 0.2)  # the bucket full again
    cpu0, t0 = time.process_time(), time.time()
    row = await scheduler.trigger("pro_chains")
    final = await asyncio.wait_for(scheduler.wait_run(row.pk), 120)
    chain_s, chain_cpu = time.time() - t0, time.process_time() - cpu0
    stats = await cluster.ask("stats")
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=row.pk)}
    created = stats["created_at"]
    lags, lags_raw, waits, in_loop = [], [], [], []
    for task_id, ti in tis.items():
        chain, _, depth = task_id.partition("_")
        if int(depth) == 0:
            continue
        up = tis[f"{chain}_{int(depth) - 1:02d}"]
        pod = (ti.executor_ref or "").removeprefix("pod:").partition("@")[0]
        waited = bucket.waits.get(pod, 0.0)
        raw = created[pod] - (up.ended_at or 0.0)
        lags_raw.append(raw)
        waits.append(waited)
        lags.append(raw - waited)
        in_loop.append(client.called[pod] - (up.ended_at or 0.0))
    minimum = (args.tasks - args.burst) / args.qps
    chains = {
        "state": final.state.value,
        "makespan_s": round(chain_s, 3),
        "bucket_minimum_s": round(minimum, 3),
        "overhead_s": round(chain_s - minimum, 3),
        "edges": len(lags),
        "lag_ms_excluding_bucket": {
            "p50": ms(pct(lags, 0.5)), "p90": ms(pct(lags, 0.9)),
            "p99": ms(pct(lags, 0.99)), "max": ms(max(lags)),
        },
        "lag_ms_raw": {"p50": ms(pct(lags_raw, 0.5)), "p99": ms(pct(lags_raw, 0.99))},
        # Of the lag, until the executor asked for the pod (the scheduler's loop: the
        # tick, its commit, the launch); the rest is the bucket, HTTP and the fake.
        "lag_ms_until_create_called": {
            "p50": ms(pct(in_loop, 0.5)), "p99": ms(pct(in_loop, 0.99)),
        },
        "bucket_wait_ms": {"p50": ms(pct(waits, 0.5)), "p99": ms(pct(waits, 0.99))},
        "scheduler_cpu_ms_per_task": round(chain_cpu * 1000 / args.tasks, 3),
    }  # fmt: skip
    return {
        "fanout": fanout,
        "chains": chains,
        "requests": stats["requests"],
        "open_watches": stats["open_watches"],
        "agents_completed": stats["agents_completed"],
        "agents_failed": stats["agents_failed"],
        "cluster_cpu_s": round(stats["cpu_s"], 2),  # the fake apiserver and kubelet
        "agents_cpu_s": round(stats["agents_cpu_s"], 2),  # the simulated pod agents
    }


def median_of(results: list[dict[str, Any]], *path: str) -> float:
    values = []
    for result in results:
        value: Any = result
        for key in path:
            value = value[key]
        values.append(float(value))
    return round(statistics.median(values), 3)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    pg = start_postgres()
    try:
        repeats = []
        for _ in range(args.repeat):
            profile = cProfile.Profile(time.process_time) if args.profile else None
            if profile is not None:
                profile.enable()
            result = await one_repeat(args, pg)
            if profile is not None:
                profile.disable()
                profile.dump_stats(args.profile)
            print(json.dumps(result), file=sys.stderr)
            repeats.append(result)
    finally:
        pg.stop()
    summary = {
        "fanout_create_rate_per_s": median_of(repeats, "fanout", "create_rate_after_burst_per_s"),
        "fanout_all_created_s": median_of(repeats, "fanout", "all_created_s"),
        "chains_overhead_s": median_of(repeats, "chains", "overhead_s"),
        "lag_p50_ms": median_of(repeats, "chains", "lag_ms_excluding_bucket", "p50"),
        "lag_p99_ms": median_of(repeats, "chains", "lag_ms_excluding_bucket", "p99"),
        "scheduler_cpu_ms_per_task_chains": median_of(
            repeats, "chains", "scheduler_cpu_ms_per_task"
        ),
    }
    return {
        "config": {
            "tasks": args.tasks, "chains": args.chains, "qps": args.qps, "burst": args.burst,
            "repeat": args.repeat,
        },
        "load_average": os.getloadavg(),
        "loop": type(asyncio.get_running_loop()).__module__.partition(".")[0],
        "median": summary,
        "repeats": repeats,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--qps", type=float, default=200.0)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", type=Path, help="cProfile the scheduler's process")
    parser.add_argument(
        "--asyncio", action="store_true", help="the stdlib loop instead of the command's"
    )
    args = parser.parse_args()
    # The scheduler's process runs on the loop ``leoflow scheduler`` runs it on (uvloop,
    # where it is installed); the figures are the product's as it ships.
    runner = asyncio.run if args.asyncio else run_async
    document = json.dumps(runner(run(args)), indent=2)
    print(document)
    if args.out is not None:
        args.out.write_text(document + "\n")


if __name__ == "__main__":
    main()
