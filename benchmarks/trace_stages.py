"""Where a try's time goes in a real ``leoflow run``: a histogram per stage, from the
marks ``LEOFLOW_TRACE_STAGES`` records (``leoflow/aio/stages.py``).

    LEOFLOW_TRACE_STAGES=/tmp/trace.jsonl leoflow run dag.yaml
    python benchmarks/trace_stages.py /tmp/trace.jsonl

or let it run one itself (a fan-out of ``true`` tasks, ``max_active_tasks`` M):

    python benchmarks/trace_stages.py --fanout 2000 --max-active 32

A try's way, each arrow a stage (milliseconds, count and percentiles):

    admitted -> launch       the tick's commit, then the launch task starting
    launch -> sent           the line written to the agent's stdin
    sent -> exchange         the agent reads it, dials, presents the ticket
    exchange -> started      Start through a tick: durable RUNNING, replied
    started -> spawned       the reply reaches the agent, which spawns the command
    spawned -> complete_recv the command runs, the agent sends Complete
    complete_recv -> applied Complete waits for a tick to apply it (slot freed)
    applied -> completed     that tick's commit, then Complete answered

and the slot's hand-off when slots are the limit: ``freed -> admitted`` pairs
each admission with a finish applied in the same tick (the slot it took), and
``handoff_ticks`` counts the loop turns between a slot's freeing and the next
admission (0: the same tick).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WAY = [
    "admitted",
    "launch",
    "sent",
    "exchange",
    "started",
    "spawned",
    "complete_recv",
    "applied",
    "completed",
]


def load(path: Path) -> list[tuple[float, str, int, int]]:
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(float(at), str(stage), int(a), int(b)) for at, stage, a, b in rows]


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 3)

    return {
        "count": len(values),
        "mean_ms": round(statistics.fmean(values) * 1000, 3),
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "max_ms": round(ordered[-1] * 1000, 3),
        "histogram_ms": histogram(ordered),
    }


def counts(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "ticks": len(values),
        "mean": round(statistics.fmean(values), 2),
        "p50": ordered[len(ordered) // 2],
        "p90": ordered[int(0.9 * len(ordered))],
        "max": ordered[-1],
    }


def histogram(ordered: list[float]) -> dict[str, int]:
    edges = [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, float("inf")]
    out: dict[str, int] = {}
    i = 0
    for edge in edges:
        n = 0
        while i < len(ordered) and ordered[i] < edge:
            n += 1
            i += 1
        label = f"<{edge * 1000:g}" if edge != float("inf") else ">=1000"
        if n:
            out[label] = n
    return out


def analyse(marks: list[tuple[float, str, int, int]]) -> dict[str, Any]:
    tries: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    tick = 0
    tick_start: dict[int, float] = {}
    tick_events: dict[int, int] = {}
    tick_flushed: dict[int, float] = {}
    applied_in: dict[int, list[tuple[float, tuple[int, int]]]] = defaultdict(list)
    admitted_in: dict[int, list[tuple[float, tuple[int, int]]]] = defaultdict(list)
    transactions = 0
    tick_transactions: dict[int, int] = defaultdict(int)
    in_tick = False
    for at, stage, a, b in marks:
        if stage == "transaction":
            transactions += 1
            if in_tick:
                tick_transactions[tick] += 1
            continue
        if stage == "tick":
            in_tick = True
            tick = a
            tick_start[a] = at
            tick_events[a] = b
            continue
        if stage == "flushed":
            in_tick = False
            tick_flushed[a] = at
            continue
        key = (a, b)
        tries[key].setdefault(stage, at)
        if stage == "applied":
            applied_in[tick].append((at, key))
        elif stage == "admitted":
            admitted_in[tick].append((at, key))
    stages: dict[str, Any] = {}
    for first, second in itertools.pairwise(WAY):
        stages[f"{first} -> {second}"] = summary(
            [t[second] - t[first] for t in tries.values() if first in t and second in t]
        )
    stages["complete_recv -> completed"] = summary(
        [t["completed"] - t["complete_recv"] for t in tries.values() if "completed" in t]
    )
    stages["admitted -> completed (whole try)"] = summary(
        [t["completed"] - t["admitted"] for t in tries.values() if "completed" in t]
    )
    # The hand-off: an admission in a tick that freed slots took one of them.
    freed_to_admitted: list[float] = []
    recv_to_admitted: list[float] = []
    first_tick = min(admitted_in) if admitted_in else 0
    later = 0
    handoff_ticks: list[int] = []
    last_freed_tick: int | None = None
    for n in sorted(set(applied_in) | set(admitted_in)):
        finishes, admits = applied_in.get(n, []), admitted_in.get(n, [])
        if finishes:
            last_freed_tick = n
        if admits and n != first_tick:
            if finishes:
                handoff_ticks.extend([0] * len(admits))
            else:
                later += len(admits)
                if last_freed_tick is not None:
                    handoff_ticks.extend([n - last_freed_tick] * len(admits))
        for (f_at, f_key), (a_at, _) in zip(finishes, admits, strict=False):
            freed_to_admitted.append(a_at - f_at)
            recv = tries[f_key].get("complete_recv")
            if recv is not None:
                recv_to_admitted.append(a_at - recv)
    stages["freed -> admitted (same tick)"] = summary(freed_to_admitted)
    stages["complete_recv -> successor admitted"] = summary(recv_to_admitted)
    ticks = sorted(tick_start)
    durations = [tick_flushed[n] - tick_start[n] for n in ticks if n in tick_flushed]
    span = (marks[-1][0] - marks[0][0]) if marks else 0.0
    return {
        "tries": len(tries),
        "span_s": round(span, 3),
        "ticks": len(ticks),
        "events_per_tick": counts([tick_events[n] for n in ticks]),
        "tick_start_to_commit": summary(durations),
        "admissions_after_first_tick_not_in_a_freeing_tick": later,
        "store_transactions": transactions,
        "store_transactions_per_try": round(transactions / max(1, len(tries)), 3),
        "transactions_per_handoff_tick": counts(
            [tick_transactions[n] for n in ticks if applied_in.get(n) and admitted_in.get(n)]
        ),
        "handoff_ticks_max": max(handoff_ticks, default=0),
        "stages": stages,
    }


def fanout_yaml(n: int, max_active: int) -> str:
    tasks = "\n".join(f'  t{i:05d}:\n    command: ["true"]' for i in range(n))
    return f"dag_id: fanout\nmax_active_tasks: {max_active}\ntasks:\n{tasks}\n"


def run_traced(n: int, max_active: int, executor: str) -> list[tuple[float, str, int, int]]:
    with tempfile.TemporaryDirectory(prefix="leoflow-trace-") as tmp:
        root = Path(tmp)
        dag = root / "dag.yaml"
        dag.write_text(fanout_yaml(n, max_active))
        trace = root / "trace.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
        env["LEOFLOW_HOME"] = str(root / "home")
        env["LEOFLOW_TRACE_STAGES"] = str(trace)
        cmd = [sys.executable, "-m", "leoflow", "run", str(dag), "--executor", executor]
        done = subprocess.run(cmd, env=env, capture_output=True, cwd=ROOT, check=False)
        if done.returncode != 0:
            raise SystemExit(f"leoflow run failed:\n{done.stderr.decode()[-3000:]}")
        return load(trace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", help="a trace file (else run a fan-out)")
    parser.add_argument("--fanout", type=int, default=2000)
    parser.add_argument("--max-active", type=int, default=32)
    parser.add_argument("--executor", default="agent", choices=("agent", "subprocess"))
    args = parser.parse_args()
    marks = (
        load(Path(args.trace))
        if args.trace
        else run_traced(args.fanout, args.max_active, args.executor)
    )
    report = analyse(marks)
    report["load_average"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
