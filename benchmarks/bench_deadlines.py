"""What the scheduler's deadline check costs a tick with many live runs; one JSON document.

    .venv/bin/python benchmarks/bench_deadlines.py [--runs 300] [--tasks 10]
        [--checks 2000] [--repeat 5] [--with-deadline]

A scheduler's book holds ``--runs`` running runs of ``--tasks`` tasks each (an
in-memory store; nothing runs). The figure is CPU time per ``DeadlineWatch.check``,
the call every tick makes, median of ``--repeat`` rounds of ``--checks`` calls.
Without ``--with-deadline`` the DAG has neither ``deadline`` nor ``run_timeout``;
with it, a deadline and a run_timeout that are hours away: in both cases nothing
is due, so a check should cost the same with ten runs or a thousand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leoflow.domain.dag import DagSpec  # noqa: E402
from leoflow.domain.states import RunState  # noqa: E402
from leoflow.executor.subprocess import SubprocessExecutor  # noqa: E402
from leoflow.scheduler.core import Scheduler  # noqa: E402
from leoflow.store import Store  # noqa: E402
from leoflow.store.rows import RunRow  # noqa: E402


def _spec(tasks: int, timed: bool) -> DagSpec:
    body: dict[str, Any] = {
        "dag_id": "d",
        "tasks": {f"t{i}": {"task_id": f"t{i}", "command": "true"} for i in range(tasks)},
    }
    if timed:
        body.update(deadline=6 * 3600, run_timeout=6 * 3600)
    return DagSpec.model_validate(body)


async def _round(runs: int, tasks: int, checks: int, timed: bool) -> float:
    store = await Store.open("sqlite://")
    try:
        scheduler = Scheduler(store, SubprocessExecutor())
        spec = _spec(tasks, timed)
        now = time.time()
        for pk in range(1, runs + 1):
            row = RunRow(pk, "d", f"r{pk}", RunState.RUNNING, "manual", None, {}, now, now,
                         None, None)  # fmt: skip
            scheduler.book.adopt(row, spec, [])
        watch = scheduler._deadlines
        await watch.check(now)  # the first check takes the adopted runs in
        cpu0 = time.process_time()
        for _ in range(checks):
            await watch.check(now)
        return (time.process_time() - cpu0) / checks * 1e6
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--with-deadline", action="store_true")
    args = parser.parse_args()
    rounds = [
        asyncio.run(_round(args.runs, args.tasks, args.checks, args.with_deadline))
        for _ in range(args.repeat)
    ]
    print(
        json.dumps(
            {
                "benchmark": "deadlines",
                "runs": args.runs,
                "tasks_per_run": args.tasks,
                "with_deadline": args.with_deadline,
                "checks_per_round": args.checks,
                "rounds": args.repeat,
                "load_average": os.getloadavg(),
                "cpu_us_per_check_median": round(statistics.median(rounds), 3),
                "cpu_us_per_check_rounds": [round(r, 3) for r in rounds],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
