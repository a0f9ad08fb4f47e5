"""Warm task pods vs a pod per try, on the fake apiserver whose kubelet simulation
really runs each pod's ``leoflow agent``; prints one JSON document.

    .venv/bin/python benchmarks/bench_warm.py [--latencies 2,0.2] [--tasks 200]
        [--chain 50] [--max 8]

For each pod start latency (the fake kubelet's ``start_latency``: binding to running
container, a real node with the image cached takes ~2 s) and each mode (ephemeral: a
pod per try; warm: ``kubernetes.reuse_pods``), two workloads through the real
scheduler, SQLite store and agent endpoint (``leoflow run``'s wiring):

- W1: ``--tasks`` independent ``true`` tasks, ``max_active_tasks`` and ``max_pods``
  ``--max``;
- W2: a chain of ``--chain`` ``true`` tasks.

Each reports wall time, pod creates and apiserver LIST/WATCH calls. For warm pods,
``handover_to_first_line_ms``: per task of a warm chain of ``date`` tasks, the time
from the leader handing the task to a pod to the task's first output line (the
task prints the clock as its first line; same host clock), median and p90.
"""

from __future__ import annotations

import argparse
import asyncio
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

from leoflow.dagfile.loader import LoadOptions, load_dag_file  # noqa: E402
from leoflow.domain.states import RunState  # noqa: E402
from leoflow.runtime.lite import run_dag  # noqa: E402
from leoflow.settings import load_settings  # noqa: E402
from tests.fakekube import FakeApiServer, FakeKubelet  # noqa: E402

NS = "leoflow-tasks"


def dag_text(dag_id: str, tasks: int, *, chain: bool, warm: bool, max_active: int, cmd: str) -> str:
    lines = [f"dag_id: {dag_id}", f"max_active_tasks: {max_active}"]
    if warm:
        lines += ["kubernetes:", f"  reuse_pods: {{max_pods: {max_active}, idle_timeout: 60s}}"]
    lines.append("tasks:")
    for i in range(tasks):
        after = f", depends_on: [t{i - 1}]" if chain and i else ""
        lines.append(f"  t{i}: {{command: {json.dumps(cmd)}{after}}}")
    return "\n".join(lines) + "\n"


async def one(workdir: Path, latency: float, dag: str, *, overhead: bool = False) -> dict[str, Any]:
    async with FakeApiServer(token="bench", restricted_namespaces=[NS]) as server:
        os.environ["KUBECONFIG"] = str(server.kubeconfig(workdir / "kubeconfig"))
        settings = load_settings(
            home=workdir / "home",
            secrets_dir=workdir / "secrets",
            scheduler_poll_interval=0.2,
            task_namespace=NS,
            executor="kubernetes",
            parallelism=64,
        )
        path = workdir / "dag.yaml"
        path.write_text(dag)
        loaded = load_dag_file(path, LoadOptions())
        async with FakeKubelet(server, run_commands=True, namespace=NS, start_latency=latency):
            started = time.perf_counter()
            final, runtime = await run_dag(settings, loaded, executor_name="kubernetes")
            wall = time.perf_counter() - started
            try:
                result: dict[str, Any] = {
                    "state": final.state.value,
                    "wall_s": round(wall, 2),
                    "pod_creates": server.counts[("create", "", "pods")],
                    "pod_lists": server.counts[("list", "", "pods")],
                    "pod_watches": server.counts[("watch", "", "pods")],
                }
                pool = getattr(runtime.executor, "warm_pool", None)
                if pool is not None and pool.stats.created:
                    result["warm_retirements"] = dict(pool.stats.retired)
                if overhead and pool is not None:
                    result["handover_to_first_line_ms"] = await _overhead(runtime, pool, final)
                assert final.state is RunState.SUCCESS, result
            finally:
                await runtime.close()
    return result


async def _overhead(runtime: Any, pool: Any, final: Any) -> dict[str, float]:
    gaps = []
    for ti in await runtime.store.list_task_instances(run_pk=final.pk):
        handed = pool.stats.handed_at.get((ti.pk, ti.try_number))
        first = (await runtime.store.read_log(ti.pk, ti.try_number)).split(b"\n", 1)[0]
        if handed is not None and first:
            gaps.append((float(first) - handed) * 1000)
    gaps.sort()
    return {
        "tasks": len(gaps),
        "median": round(statistics.median(gaps), 1),
        "p90": round(gaps[int(len(gaps) * 0.9)], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latencies", default="2,0.2")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--chain", type=int, default=50)
    parser.add_argument("--max", type=int, default=8)
    args = parser.parse_args()
    bin_dir = str(Path(sys.executable).parent)  # the kubelet starts `leoflow agent`
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    os.environ.pop("KUBERNETES_SERVICE_HOST", None)
    report: dict[str, Any] = {"tasks": args.tasks, "chain": args.chain, "max": args.max}
    for latency in (float(x) for x in args.latencies.split(",")):
        figures: dict[str, Any] = {}
        for mode in ("ephemeral", "warm"):
            warm = mode == "warm"
            for name, tasks, chain in (("W1", args.tasks, False), ("W2", args.chain, True)):
                with tempfile.TemporaryDirectory() as tmp:
                    work = Path(tmp)
                    (work / "secrets").mkdir()
                    dag = dag_text(
                        f"{name.lower()}_{mode}", tasks, chain=chain, warm=warm,
                        max_active=args.max, cmd="true",
                    )  # fmt: skip
                    figures[f"{name}_{mode}"] = await one(work, latency, dag)
        for name in ("W1", "W2"):
            figures[f"{name}_speedup"] = round(
                figures[f"{name}_ephemeral"]["wall_s"] / figures[f"{name}_warm"]["wall_s"], 1
            )
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "secrets").mkdir()
            dag = dag_text("overhead", 30, chain=True, warm=True, max_active=1, cmd="date +%s.%N")
            figures["overhead_chain"] = await one(work, latency, dag, overhead=True)
        report[f"start_latency_{latency:g}s"] = figures
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
