"""Admission throughput and cost per decision as the queue grows.

    python benchmarks/bench_admission.py [--sizes 1000,10000,100000] [--reps 5]

Two scenarios. ``skewed`` (the stress case): 500 DAGs of which a few own most
tasks, max_active_tasks 4 (so it binds), 10 pools of uneven size (so pools bind
too). ``uniform``: 500 equally busy DAGs with the DagSpec default of 16, 10 equal
pools. For each queue size: build that many ready task instances with random
priorities; time filling the queue;
then run a steady state in which every step releases ``batch`` held task
instances, offers as many new ones (the queue keeps its size) and calls admit().
A decision is one admitted task instance; its cost includes its share of the
release and the offer. ``curves_us_per_decision_by_queue_size`` is the cost curve
(wall and CPU µs per decision by queue size, per scenario and batch). Prints
JSON; figures are medians over ``reps`` runs of time.perf_counter, with the
process's CPU time beside them (the two differ when the machine is shared).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leoflow.domain.admission import DEFAULT_POOL, Admission, Candidate

DAGS = 500
POOLS = [DEFAULT_POOL] + [f"pool_{i}" for i in range(1, 10)]
PARALLELISM = 256
DECISIONS_PER_RUN = 20_000
SCENARIOS: dict[str, dict[str, Any]] = {
    "skewed": {
        "dag_weights": [1.0 / (i + 1) for i in range(DAGS)],
        "dag_limit": 4,
        "pool_sizes": [128, 64, 32, 16, 16, 8, 8, 4, 4, 2],
    },
    "uniform": {
        "dag_weights": [1.0] * DAGS,
        "dag_limit": 16,
        "pool_sizes": [32] * 10,
    },
}


class Workload:
    def __init__(self, scenario: dict[str, Any], seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_key = 0
        self.dag_ids = [f"dag_{i:03d}" for i in range(DAGS)]
        self.dag_weights = scenario["dag_weights"]
        self.pool_weights = [float(s) for s in scenario["pool_sizes"]]

    def candidates(self, n: int) -> list[Candidate]:
        rng = self.rng
        dags = rng.choices(self.dag_ids, self.dag_weights, k=n)
        pools = rng.choices(POOLS, self.pool_weights, k=n)
        out = []
        for dag, pool in zip(dags, pools, strict=True):
            key = self.next_key
            self.next_key += 1
            slots = rng.choices((1, 2, 4), (80, 15, 5))[0]
            out.append(
                Candidate(
                    key=key,
                    dag_id=dag,
                    pool=pool,
                    pool_slots=slots,
                    priority=rng.randrange(10),
                    run_order=float(rng.randrange(key // 50 + 1)),
                    ready_order=float(key),
                )
            )
        return out


def one_run(scenario: dict[str, Any], size: int, batch: int, seed: int) -> dict[str, float]:
    work = Workload(scenario, seed)
    initial = work.candidates(size)
    steps = DECISIONS_PER_RUN // batch
    # Enough fresh candidates for the whole steady state, built before timing.
    fresh = work.candidates(steps * batch + batch)
    adm = Admission(PARALLELISM, dict(zip(POOLS, scenario["pool_sizes"], strict=True)))
    for dag in work.dag_ids:
        adm.set_dag_limit(dag, scenario["dag_limit"])

    gc.collect()
    t0 = time.perf_counter()
    for c in initial:
        adm.offer(c)
    fill_s = time.perf_counter() - t0

    held = [c.key for c in adm.admit()]
    rng = random.Random(seed + 1)
    # Which held task finishes next is random; pick the victims before timing.
    picks = [rng.random() for _ in range(steps * batch)]
    decisions = 0
    released = 0
    fresh_i = 0
    pick_i = 0
    release, offer, admit = adm.release, adm.offer, adm.admit
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(steps):
        for _ in range(batch):
            if held:
                i = int(picks[pick_i] * len(held))
                pick_i += 1
                held[i], held[-1] = held[-1], held[i]
                released += release(held.pop())
            offer(fresh[fresh_i])
            fresh_i += 1
        got = admit()
        decisions += len(got)
        held.extend(c.key for c in got)
    steady_s = time.perf_counter() - t0
    steady_cpu_s = time.process_time() - c0
    assert adm.waiting_count + adm.held_count == size + fresh_i - released
    return {
        "fill_s": fill_s,
        "steady_s": steady_s,
        "steady_cpu_s": steady_cpu_s,
        "decisions": decisions,
        "waiting_at_end": adm.waiting_count,
    }


def measure(name: str, size: int, batch: int, reps: int) -> dict[str, Any]:
    runs = [one_run(SCENARIOS[name], size, batch, seed=1000 + r) for r in range(reps)]
    per_decision = [r["steady_s"] / r["decisions"] for r in runs]
    med = statistics.median(per_decision)
    cpu = statistics.median(r["steady_cpu_s"] / r["decisions"] for r in runs)
    return {
        "scenario": name,
        "queue_size": size,
        "batch": batch,
        "decisions_per_run": int(statistics.median(r["decisions"] for r in runs)),
        "decisions_per_s": round(1.0 / med),
        "us_per_decision": round(med * 1e6, 2),
        # CPU time of this process: unaffected by other processes on a shared machine.
        "cpu_us_per_decision": round(cpu * 1e6, 2),
        "cpu_decisions_per_s": round(1.0 / cpu),
        "us_per_decision_min_max": [
            round(min(per_decision) * 1e6, 2),
            round(max(per_decision) * 1e6, 2),
        ],
        "fill_s": round(statistics.median(r["fill_s"] for r in runs), 4),
        "fill_us_per_offer": round(statistics.median(r["fill_s"] for r in runs) / size * 1e6, 2),
        "waiting_at_end": int(statistics.median(r["waiting_at_end"] for r in runs)),
    }


def calibration_us() -> float:
    """This machine's speed, to compare figures across machines: one heappush plus
    one heappop on a 150-entry heap of flat tuples, in µs (median of 5)."""
    rng = random.Random(7)
    times = []
    for _ in range(5):
        heap = [(rng.randrange(10), rng.random(), i) for i in range(150)]
        heapq.heapify(heap)
        new = [(rng.randrange(10), rng.random(), 150 + i) for i in range(50_000)]
        t0 = time.perf_counter()
        for e in new:
            heapq.heappush(heap, e)
            heapq.heappop(heap)
        times.append((time.perf_counter() - t0) / len(new) * 1e6)
    return round(statistics.median(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--scenarios", default="uniform,skewed")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    names = args.scenarios.split(",")
    results = [
        measure(name, size, batch, args.reps)
        for name in names
        for batch in batches
        for size in sizes
    ]
    flat = {}
    curves: dict[str, dict[str, dict[int, float]]] = {"wall_us": {}, "cpu_us": {}}
    for name in names:
        for batch in batches:
            rows = [r for r in results if r["batch"] == batch and r["scenario"] == name]
            flat[f"{name}_batch_{batch}_cost_ratio_largest_vs_smallest"] = round(
                rows[-1]["us_per_decision"] / rows[0]["us_per_decision"], 2
            )
            flat[f"{name}_batch_{batch}_cpu_cost_ratio_largest_vs_smallest"] = round(
                rows[-1]["cpu_us_per_decision"] / rows[0]["cpu_us_per_decision"], 2
            )
            # The cost curve: µs per decision by queue size (flat is the goal).
            label = f"{name}_batch_{batch}"
            curves["wall_us"][label] = {r["queue_size"]: r["us_per_decision"] for r in rows}
            curves["cpu_us"][label] = {r["queue_size"]: r["cpu_us_per_decision"] for r in rows}
    print(
        json.dumps(
            {
                "benchmark": "admission",
                "python": platform.python_version(),
                "calibration_us_heappush_pop_150": calibration_us(),
                "config": {
                    "dags": DAGS,
                    "scenarios": {
                        name: {
                            "dag_max_active_tasks": SCENARIOS[name]["dag_limit"],
                            "dag_sizes": "1/(i+1) skew" if name == "skewed" else "equal",
                            "pools": dict(zip(POOLS, SCENARIOS[name]["pool_sizes"], strict=True)),
                        }
                        for name in names
                    },
                    "parallelism": PARALLELISM,
                    "pool_slots_mix": {"1": 0.80, "2": 0.15, "4": 0.05},
                    "priorities": "uniform 0-9",
                    "reps": args.reps,
                    "statistic": "median over reps",
                    "decision": "one admitted task instance, incl. its release and re-offer",
                },
                "results": results,
                "load_average": os.getloadavg(),
                "curves_us_per_decision_by_queue_size": curves,
                "flatness": flat,
                "target_decisions_per_s": {"skewed_100000": 50_000, "uniform_100000": 100_000},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
