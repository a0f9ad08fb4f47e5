"""Lite, whole process: `leoflow run` from start to exit on two workloads.

- fan-out: 200 independent `true` tasks with max_active_tasks 8
- chain: 50 `true` tasks, each depending on the one before

For each executor (the warm agent over gRPC, and direct subprocesses) it reports
the median wall time of whole `leoflow run` processes, and for the chain the
step-to-step lag (one task's end to the next one's start, from the store).

    python benchmarks/bench_lite.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LEOFLOW = str(Path(sys.executable).parent / "leoflow")


def fan_out(path: Path) -> Path:
    tasks = "\n".join(f'  t{i:03d}:\n    command: ["true"]' for i in range(200))
    path.write_text(f"dag_id: fanout\nmax_active_tasks: 8\ntasks:\n{tasks}\n")
    return path


def chain(path: Path) -> Path:
    lines = []
    for i in range(50):
        lines.append(f'  t{i:02d}:\n    command: ["true"]')
        if i:
            lines.append(f"    depends_on: [t{i - 1:02d}]")
    path.write_text("dag_id: chain\ntasks:\n" + "\n".join(lines) + "\n")
    return path


def run_once(dag: Path, executor: str, home: Path) -> tuple[float, float]:
    """Wall time, and CPU time (user + system of the process, its agent and its tasks):
    on a shared machine the wall time waits for cores; the CPU time is what the run costs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env["LEOFLOW_HOME"] = str(home)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [LEOFLOW, "run", str(dag), "--executor", executor],
        env=env,
        capture_output=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        tail = done.stdout.decode()[-3000:]
        raise SystemExit(f"leoflow run failed ({done.returncode}):\n{done.stderr.decode()}\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def chain_lags(home: Path) -> list[float]:
    with sqlite3.connect(home / "leoflow.db") as db:
        (run_pk,) = db.execute(
            "select pk from dag_runs where dag_id='chain' order by pk desc limit 1"
        ).fetchone()
        rows = db.execute(
            "select task_id, started_at, ended_at from task_instances"
            " where run_pk=? order by task_id",
            (run_pk,),
        ).fetchall()
    return [nxt[1] - cur[2] for cur, nxt in itertools.pairwise(rows)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--executor", action="append", choices=["agent", "subprocess"])
    parser.add_argument("--workload", action="append", choices=["fanout_200", "chain_50"])
    args = parser.parse_args()
    results: dict[str, object] = {
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dags = {"fanout_200": fan_out(root / "fanout.yaml"), "chain_50": chain(root / "chain.yaml")}
        dags = {k: v for k, v in dags.items() if args.workload is None or k in args.workload}
        for executor in args.executor or ["agent", "subprocess"]:
            for name, dag in dags.items():
                home = root / f"home-{executor}-{name}"
                run_once(dag, executor, home)  # warm: migrations, page cache
                runs = [run_once(dag, executor, home) for _ in range(args.repeat)]
                times = [t for t, _ in runs]
                entry: dict[str, object] = {
                    "cpu_s_median": round(statistics.median(c for _, c in runs), 3),
                    "wall_s_median": round(statistics.median(times), 3),
                    "wall_s_min": round(min(times), 3),
                    "wall_s_max": round(max(times), 3),
                }
                if name == "chain_50":
                    lags = sorted(chain_lags(home))
                    entry["step_lag_ms_p50"] = round(statistics.median(lags) * 1000, 2)
                    entry["step_lag_ms_p90"] = round(lags[int(len(lags) * 0.9)] * 1000, 2)
                results[f"{executor}/{name}"] = entry
    for name in dags:
        if f"agent/{name}" not in results or f"subprocess/{name}" not in results:
            continue
        for measure in ("wall_s_median", "cpu_s_median"):
            agent = results[f"agent/{name}"][measure]  # type: ignore[index]
            direct = results[f"subprocess/{name}"][measure]  # type: ignore[index]
            results[f"agent_vs_direct/{name}/{measure}"] = round(agent / direct, 3)
    results["loadavg_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
