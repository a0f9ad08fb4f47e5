"""A compressed 24-hour soak of retention; prints one JSON document.

    .venv/bin/python benchmarks/bench_retention_soak.py [--hours 24] [--runs-per-hour 60]
        [--tasks 10] [--retention-hours 2] [--log-bytes 4096]

A SQLite store (Lite) on a simulated clock: every simulated minute a run of
``--tasks`` tasks is created, run to success (each task writes a log chunk) and
finished; every 5 simulated minutes the scheduler's retention pass
(``scheduler.retention.Retention``, the same code ``LEOFLOW_RETENTION`` starts)
prunes what finished more than ``--retention-hours`` ago. Each simulated hour
records the rows and the database's size: the file (with its WAL) and the pages
in use. Retention is working when both stop growing once the window is full.

Meanwhile a probe writes a heartbeat every 5 ms, as the scheduler loop's writes
would, and its latency is reported during prune passes and outside them: a
prune must not stall the loop's writes for longer than one small batch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy.engine import Connection  # noqa: E402

from leoflow.domain.states import RunState, TaskState  # noqa: E402
from leoflow.scheduler.retention import Retention  # noqa: E402
from leoflow.store import Store, TaskChange, TaskSeed  # noqa: E402

T = TaskState
CHAIN = [(T.NONE, T.SCHEDULED), (T.SCHEDULED, T.QUEUED), (T.QUEUED, T.RUNNING)]


def _pages(conn: Connection) -> tuple[int, int, int]:
    def pragma(name: str) -> int:
        return int(conn.exec_driver_sql(f"PRAGMA {name}").scalar_one())

    return pragma("page_count"), pragma("freelist_count"), pragma("page_size")


async def _rows(store: Store) -> dict[str, int]:
    def op(conn: Connection) -> dict[str, int]:
        return {
            table: int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
            for table in ("dag_runs", "task_instances", "log_chunks", "tickets")
        }

    return await store._read(op)


def _ms(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(s * 1000 for s in samples)
    return {
        "n": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2], 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        "max_ms": round(ordered[-1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def _one_run(store: Store, index: int, at: float, tasks: int, log: bytes) -> None:
    seeds = [TaskSeed(f"t{i:02d}", "default_pool", 1, 0, 1) for i in range(tasks)]
    run = await store.create_run(
        "soak", f"run{index:06d}", run_type="manual", logical_date=None, conf={},
        tasks=seeds, epoch=None,
    )  # fmt: skip
    tis = await store.list_task_instances(run_pk=run.pk)
    changes = [TaskChange(ti.pk, old, new) for ti in tis for old, new in CHAIN]
    changes += [TaskChange(ti.pk, T.RUNNING, T.SUCCESS, fields={"ended_at": at}) for ti in tis]
    await store.transition_tasks(changes, epoch=None)
    for ti in tis:
        await store.append_log(ti.pk, 0, log)
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    await store.transition_run(run.pk, RunState.RUNNING, RunState.SUCCESS, epoch=None, ended_at=at)


async def soak(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    path = home / "leoflow.db"
    store = await Store.open(f"sqlite:///{path}")
    sim = {"now": 1_700_000_000.0}
    retention = Retention(store, args.retention_hours * 3600, pause=0.005, clock=lambda: sim["now"])
    # The probe: one task instance kept running, heartbeated as an agent would.
    probe_run = await store.create_run(
        "probe", "probe", run_type="manual", logical_date=None, conf={},
        tasks=[TaskSeed("beat", "default_pool", 1, 0, 1)], epoch=None,
    )  # fmt: skip
    (probe,) = await store.list_task_instances(run_pk=probe_run.pk)
    await store.transition_tasks([TaskChange(probe.pk, o, n) for o, n in CHAIN], epoch=None)
    pruning = False
    during: list[float] = []
    outside: list[float] = []
    stop = asyncio.Event()

    async def beat() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            assert await store.heartbeat(probe.pk, 0, time.time())
            (during if pruning else outside).append(time.perf_counter() - started)
            await asyncio.sleep(0.005)

    prober = asyncio.create_task(beat())
    log = b"x" * (args.log_bytes - 1) + b"\n"
    minutes_per_run = 60 / args.runs_per_hour
    curve: list[dict[str, Any]] = []
    prune_passes: list[float] = []
    started = time.perf_counter()
    index = 0
    for minute in range(int(args.hours * 60)):
        sim["now"] += 60.0
        while index * minutes_per_run <= minute:
            await _one_run(store, index, sim["now"], args.tasks, log)
            index += 1
        if minute % 5 == 4:
            pruning = True
            t0 = time.perf_counter()
            await retention.prune_once()
            prune_passes.append(time.perf_counter() - t0)
            pruning = False
        if minute % 60 == 59:
            pages, free, size = await store._read(_pages)
            wal = path.with_name(path.name + "-wal")
            curve.append(
                {
                    "hour": (minute + 1) // 60,
                    **await _rows(store),
                    "file_bytes": path.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
                    "live_bytes": (pages - free) * size,
                }
            )
    stop.set()
    await prober
    await store.close()
    window = int(args.retention_hours) + 1
    steady = [point for point in curve if point["hour"] > window]
    live = [point["live_bytes"] for point in steady]
    files = [point["file_bytes"] for point in steady]
    return {
        "simulated_hours": args.hours,
        "runs_created": index,
        "tasks_per_run": args.tasks,
        "log_bytes_per_task": args.log_bytes,
        "retention_hours": args.retention_hours,
        "retention": {"batch": retention.batch, "pause_s": retention.pause, "every": "5 min"},
        "runs_pruned": retention.total.runs,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "prune_pass": _ms(prune_passes),
        "heartbeat_write_during_prune": _ms(during),
        "heartbeat_write_outside_prune": _ms(outside),
        "steady_state_after_hour": window,
        "live_bytes_min_max": [min(live), max(live)] if live else None,
        "file_bytes_min_max": [min(files), max(files)] if files else None,
        "live_growth_over_steady_state": round(live[-1] / live[0], 3) if live else None,
        "size_curve": curve,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--runs-per-hour", type=float, default=60)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--retention-hours", type=float, default=2)
    parser.add_argument("--log-bytes", type=int, default=4096)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="leoflow-soak-") as home:
        result = asyncio.run(soak(args, Path(home)))
    print(json.dumps({"bench_retention_soak": result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
