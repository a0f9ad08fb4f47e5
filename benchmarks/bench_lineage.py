"""What OpenLineage emission costs the scheduler per task try, with a slow endpoint.

    .venv/bin/python benchmarks/bench_lineage.py [--tasks 200] [--repeat 3] [--delay 1.0]

Two figures, one JSON document:

- ``loop_us_per_try``: CPU µs the loop spends in ``Lineage.collect`` + ``emit`` for one
  try's two transitions (running -> START, success -> COMPLETE), the only lineage work
  done on the loop; median of ``--repeat`` rounds of ``--tasks`` tries.
- ``run_wall_s``: a real scheduler (SQLite in memory, subprocess executor) runs a DAG of
  ``--tasks`` ``true`` tasks, with lineage off and with lineage on to a local HTTP
  endpoint that answers each event after ``--delay`` seconds: the run's wall time and
  the scheduler ticks it took should be the same in both (the endpoint's slowness is
  paid by the background sender: events sent while the run ran, dropped are counted).
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
from leoflow.domain.states import TaskState  # noqa: E402
from leoflow.executor.subprocess import SubprocessExecutor  # noqa: E402
from leoflow.scheduler.batch import Batch  # noqa: E402
from leoflow.scheduler.core import Scheduler, SchedulerConfig  # noqa: E402
from leoflow.scheduler.lineage import EVENTS, Lineage  # noqa: E402
from leoflow.scheduler.mirror import RunMirror, TaskMirror  # noqa: E402
from leoflow.settings_lineage import LineageSettings  # noqa: E402
from leoflow.store import Store  # noqa: E402
from leoflow.store.rows import TaskChange  # noqa: E402


def _spec(tasks: int) -> DagSpec:
    return DagSpec.model_validate(
        {
            "dag_id": "d",
            "tasks": {
                f"t{i}": {
                    "task_id": f"t{i}",
                    "command": "true",
                    "produces": [f"s3://b/t{i}"],
                    "consumes": ["raw"],
                }
                for i in range(tasks)
            },
        }
    )


async def _slow_endpoint(delay: float) -> tuple[asyncio.Server, str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                del line
                await asyncio.sleep(delay)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _settings(url: str) -> LineageSettings:
    return LineageSettings(transport="http", url=url, endpoint="", timeout=60.0)


async def _loop_cost(tasks: int, url: str) -> float:
    lineage = Lineage(_settings(url))
    spec = _spec(tasks)
    run = RunMirror(1, "d", "r", "running", 0.0, 0.0, spec, tuple(spec.tasks))  # type: ignore[arg-type]
    batches = []
    for i in range(tasks):
        ti = TaskMirror(i, 1, f"t{i}", TaskState.RUNNING, 1, 1, "default", 1, 0)
        run.tasks[ti.task_id] = ti
        batch = Batch()
        for old, new in ((TaskState.QUEUED, TaskState.RUNNING),
                         (TaskState.RUNNING, TaskState.SUCCESS)):  # fmt: skip
            batch.changes.append(TaskChange(i, old, new, 1, {"ended_at": 1.0}))
            batch.touched.append(ti)
        batches.append(batch)
    runs = {1: run}
    cpu0 = time.process_time()
    for batch in batches:
        lineage.emit(lineage.collect(batch, runs, 1.0))
    cost = (time.process_time() - cpu0) / tasks * 1e6
    await lineage.stop(grace=0)
    return cost


async def _run(tasks: int, url: str | None) -> dict[str, Any]:
    store = await Store.open("sqlite://")
    try:
        spec = _spec(tasks)
        await store.upsert_dag("d", fileloc="d.yaml", spec_json=spec.model_dump_json(),
                               spec_hash="h", source=None)  # fmt: skip
        epoch = await store.take_office("bench")
        scheduler = Scheduler(store, SubprocessExecutor(), SchedulerConfig(parallelism=32),
                              epoch=epoch)  # fmt: skip
        if url is not None:
            scheduler.lineage = Lineage(_settings(url))
        ticks = 0
        tick = scheduler._tick

        async def counted() -> None:
            nonlocal ticks
            ticks += 1
            await tick()

        scheduler._tick = counted  # type: ignore[method-assign]
        sent0 = EVENTS.labels(outcome="sent")._value.get()
        await scheduler.start()
        started = time.perf_counter()
        row = await scheduler.trigger("d")
        await scheduler.wait_run(row.pk)
        wall = time.perf_counter() - started
        pending = scheduler.lineage.pending
        sent = EVENTS.labels(outcome="sent")._value.get() - sent0
        await scheduler.stop()
        return {"wall_s": round(wall, 3), "ticks": ticks, "events_sent_during_run": sent,
                "events_waiting_at_end": pending}  # fmt: skip
    finally:
        await store.close()


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    server, url = await _slow_endpoint(args.delay)
    try:
        costs = [await _loop_cost(args.tasks, url) for _ in range(args.repeat)]
        off, on = [], []
        for _ in range(args.repeat):  # interleaved: a shared machine's drift hits both
            off.append(await _run(args.tasks, None))
            on.append(await _run(args.tasks, url))
    finally:
        server.close()
    return {
        "tasks": args.tasks,
        "endpoint_delay_s": args.delay,
        "loop_us_per_try": round(statistics.median(costs), 2),
        "run_wall_s": {
            "lineage_off": statistics.median(r["wall_s"] for r in off),
            "lineage_on_slow_endpoint": statistics.median(r["wall_s"] for r in on),
        },
        "runs": {"off": off, "on": on},
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=1.0)
    print(json.dumps(asyncio.run(_main(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
