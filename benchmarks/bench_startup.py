"""Start-up: a one-task `leoflow run`, whole process, and where its imports go.

- warm: LEOFLOW_HOME whose database is already at head (the common case)
- fresh: a new LEOFLOW_HOME each run (creates and migrates the database)
- floors: the bare interpreter, and the stack's imports alone (uvloop, grpc,
  SQLAlchemy, PyYAML, protobuf, pydantic), timed between the warm runs

For each executor it reports the median wall time of N whole processes
(`python -m leoflow run`), and once, `python -X importtime` of the same command:
the ten imports with the largest cumulative time and the total.

Bytecode caching is on whatever the calling shell says (PYTHONDONTWRITEBYTECODE
is dropped): an installed Leoflow has its .pyc files, and the untimed first run
writes them here, so the timed runs measure imports, not compiling.

    python benchmarks/bench_startup.py [--repeat 5] [--executor agent]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LEOFLOW = [sys.executable, "-m", "leoflow"]
# What a one-task run cannot do without: the interpreter, and its stack's imports alone
# (no Leoflow module, no work). Timed between the warm runs, so drift hits both alike.
BARE = [sys.executable, "-c", "pass"]
STACK = [
    sys.executable,
    "-c",
    "import uvloop, grpc, grpc.aio, sqlite3, sqlalchemy, yaml, google.protobuf.message;"
    " from pydantic import BaseModel, Field",
]
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def one_task(path: Path) -> Path:
    path.write_text('dag_id: one\ntasks:\n  only:\n    command: ["true"]\n')
    return path


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["LEOFLOW_HOME"] = str(home)
    return env


def run_once(cmd: list[str], home: Path) -> tuple[float, float]:
    """Wall time, and CPU time (user + system, the process and its agent): on a shared
    machine the wall time waits for cores; the CPU time is what start-up costs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env_for(home), capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def import_profile(dag: Path, executor: str, home: Path) -> dict[str, object]:
    cmd = [sys.executable, "-X", "importtime", "-m", "leoflow", "run", str(dag)]
    done = subprocess.run(
        [*cmd, "--executor", executor], env=env_for(home), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"importtime run failed:\n{done.stderr.decode()[-3000:]}")
    rows = []
    loaded = set()
    total_us = 0
    for line in done.stderr.decode().splitlines():
        match = IMPORT_LINE.match(line)
        if match is None:
            continue
        self_us, cumulative_us, indent, name = match.groups()
        total_us += int(self_us)
        loaded.add(name.split(".")[0])
        # Top-level imports only (no indent), so nested modules are not counted twice.
        if len(indent) <= 1:
            rows.append((int(cumulative_us), name))
    rows.sort(reverse=True)
    return {
        "total_import_ms": round(total_us / 1000, 1),
        "top10_cumulative_ms": [{"module": n, "ms": round(us / 1000, 1)} for us, n in rows[:10]],
        "heavy_modules_loaded": sorted(
            m
            for m in (
                "alembic",
                "fastapi",
                "uvicorn",
                "kubernetes_asyncio",
                "asyncpg",
                "prometheus_client",
                "httpx",
                "jinja2",
            )
            if m in loaded
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--executor", action="append", choices=["agent", "subprocess"])
    args = parser.parse_args()
    executors = args.executor or ["agent", "subprocess"]
    results: dict[str, object] = {
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="leoflow-bench-startup-") as tmp:
        root = Path(tmp)
        dag = one_task(root / "one.yaml")
        for executor in executors:
            cmd = [*LEOFLOW, "run", str(dag), "--executor", executor]
            warm_home = root / f"warm-{executor}"
            run_once(cmd, warm_home)  # creates the database; the timed runs find it at head
            warm, bare, stack = [], [], []
            for _ in range(args.repeat):
                warm.append(run_once(cmd, warm_home))
                bare.append(run_once(BARE, warm_home))
                stack.append(run_once(STACK, warm_home))
            fresh = [run_once(cmd, root / f"fresh-{executor}-{i}") for i in range(args.repeat)]
            results[executor] = {
                "warm_median_s": round(statistics.median(t for t, _ in warm), 3),
                "warm_runs_s": [round(t, 3) for t, _ in warm],
                "warm_cpu_median_s": round(statistics.median(c for _, c in warm), 3),
                # the same moments' interpreter alone, and the stack's imports alone
                "floor_interpreter_median_s": round(statistics.median(t for t, _ in bare), 3),
                "floor_stack_imports_median_s": round(statistics.median(t for t, _ in stack), 3),
                # CPU, not wall: on a shared machine the wall times wait for cores.
                "floor_stack_imports_cpu_median_s": round(
                    statistics.median(c for _, c in stack), 3
                ),
                "warm_cpu_over_stack_cpu": round(
                    statistics.median(c for _, c in warm) / statistics.median(c for _, c in stack),
                    2,
                ),
                "fresh_median_s": round(statistics.median(t for t, _ in fresh), 3),
                "fresh_runs_s": [round(t, 3) for t, _ in fresh],
                "fresh_cpu_median_s": round(statistics.median(c for _, c in fresh), 3),
                "imports_warm": import_profile(dag, executor, warm_home),
            }
    results["loadavg_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
