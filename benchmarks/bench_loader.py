"""How long the DAG loader takes on large graphs, and on hostile files it refuses.

    python benchmarks/bench_loader.py [--tasks 10000] [--reps 3]

Shapes: a chain (each task depends on the previous one), a fan-out (one root,
every task below it), a fan-in (every task above one sink), a 10,000-task cycle
(refused), "billion laughs" alias expansion (refused) and 5,000 levels of nesting
(refused). Each figure is parse_dag plus validation and, for valid shapes, the
topological order, from text in memory; median of ``reps`` wall-clock runs of
time.perf_counter with CPU time beside it, and the tracemalloc peak of one extra
run. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.progress import topological_order

PATH = Path("bench.yaml")


def chain(n: int) -> str:
    body = "".join(f"  t{i}: {{command: echo, depends_on: [t{i - 1}]}}\n" for i in range(1, n))
    return "dag_id: chain\ntasks:\n  t0: {command: echo}\n" + body


def fan_out(n: int) -> str:
    body = "".join(f"  t{i}: {{command: echo, depends_on: [root]}}\n" for i in range(n))
    return "dag_id: fan_out\ntasks:\n  root: {command: echo}\n" + body


def fan_in(n: int) -> str:
    body = "".join(f"  t{i}: {{command: echo}}\n" for i in range(n))
    sink = "  sink: {command: echo, depends_on: [" + ",".join(f"t{i}" for i in range(n)) + "]}\n"
    return "dag_id: fan_in\ntasks:\n" + body + sink


def cycle(n: int) -> str:
    body = "".join(f"  t{i}: {{command: echo, depends_on: [t{(i - 1) % n}]}}\n" for i in range(n))
    return "dag_id: cycle\ntasks:\n" + body


def laughs(_: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]")
    return "dag_id: laughs\ntasks: {t: {command: echo}}\n" + "\n".join(lines) + "\n"


def nesting(_: int) -> str:
    return "dag_id: nest\ntasks: " + "[" * 5000 + "]" * 5000 + "\n"


SHAPES: dict[str, Callable[[int], str]] = {
    "chain": chain,
    "fan_out": fan_out,
    "fan_in": fan_in,
    "cycle": cycle,
    "billion_laughs": laughs,
    "nesting_5000": nesting,
}


def load(text: str) -> str:
    try:
        spec = parse_dag(text, PATH)
    except DagFileError as exc:
        return "refused: " + exc.problems[0].message[:80]
    topological_order(spec)
    return f"valid, {len(spec.tasks)} tasks"


def measure(text: str, reps: int) -> dict[str, object]:
    walls, cpus = [], []
    outcome = ""
    for _ in range(reps):
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = load(text)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    tracemalloc.start()
    load(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "outcome": outcome,
        "bytes": len(text.encode()),
        "wall_s_median": round(statistics.median(walls), 4),
        "cpu_s_median": round(statistics.median(cpus), 4),
        "tracemalloc_peak_mb": round(peak / 1e6, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    results = {name: measure(make(args.tasks), args.reps) for name, make in SHAPES.items()}
    print(
        json.dumps(
            {
                "benchmark": "loader",
                "tasks": args.tasks,
                "reps": args.reps,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "results": results,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
