"""Store benchmarks; prints one JSON document.

    .venv/bin/python benchmarks/bench_store.py [--postgres-url URL] [--runs 100000]

Without --postgres-url (or LEOFLOW_TEST_DATABASE_URL) an embedded PostgreSQL is
started in a temporary directory, as the test suite does.

Figures: transition_tasks batch time (1,000 changes) on SQLite and PostgreSQL,
single-call latencies, and list_runs page latency (p50/p99, page of 100) over
100,000 runs in PostgreSQL: newest page, deep keyset pages, per-DAG and per-state.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncpg  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from leoflow.domain.states import RunState, TaskState  # noqa: E402
from leoflow.store import Store, TaskChange, TaskSeed  # noqa: E402

T = TaskState


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": round(_pct(ms, 0.50), 3),
        "p99_ms": round(_pct(ms, 0.99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


async def bench_transitions(url: str, *, batch: int = 1000, rounds: int = 10) -> dict[str, Any]:
    store = await Store.open(url)
    try:
        epoch = await store.take_office("bench")
        seeds = [TaskSeed(f"t{i:05d}", "default_pool", 1, i % 10, 3) for i in range(batch)]
        to_scheduled: list[float] = []
        to_queued: list[float] = []
        create: list[float] = []
        for r in range(rounds):
            t0 = time.perf_counter()
            run = await store.create_run(
                "bench", f"r{r}", run_type="manual", logical_date=None, conf={}, tasks=seeds,
                epoch=epoch,
            )  # fmt: skip
            create.append(time.perf_counter() - t0)
            pks = [ti.pk for ti in await store.list_task_instances(run_pk=run.pk)]
            t0 = time.perf_counter()
            ok = await store.transition_tasks(
                [TaskChange(pk, T.NONE, T.SCHEDULED, fields={"ready_at": 1.0}) for pk in pks],
                epoch=epoch,
            )
            to_scheduled.append(time.perf_counter() - t0)
            assert all(ok)
            t0 = time.perf_counter()
            ok = await store.transition_tasks(
                [
                    TaskChange(
                        pk, T.SCHEDULED, T.QUEUED, fields={"try_number": 1, "queued_at": 2.0}
                    )
                    for pk in pks
                ],
                epoch=epoch,
            )
            to_queued.append(time.perf_counter() - t0)
            assert all(ok)

        # Per-call latency of the calls a task makes one at a time.
        run = await store.create_run(
            "bench", "single", run_type="manual", logical_date=None, conf={}, tasks=seeds[:300],
            epoch=epoch,
        )  # fmt: skip
        pks = [ti.pk for ti in await store.list_task_instances(run_pk=run.pk)]
        await store.transition_tasks(
            [TaskChange(pk, T.NONE, T.SCHEDULED) for pk in pks], epoch=epoch
        )
        single: list[float] = []
        for pk in pks:
            t0 = time.perf_counter()
            assert await store.transition_task(pk, T.SCHEDULED, T.QUEUED, epoch=epoch, try_number=1)
            single.append(time.perf_counter() - t0)
        reads: list[float] = []
        for pk in pks:
            t0 = time.perf_counter()
            await store.get_task_instance(pk)
            reads.append(time.perf_counter() - t0)
        beats: list[float] = []
        for pk in pks:
            t0 = time.perf_counter()
            await store.heartbeat(pk, 1, 3.0)
            beats.append(time.perf_counter() - t0)
        return {
            "batch_size": batch,
            "create_run_with_tasks": _summary(create),
            "transition_tasks_none_to_scheduled": _summary(to_scheduled),
            "transition_tasks_scheduled_to_queued": _summary(to_queued),
            "changes_per_second": round(batch / statistics.median(to_scheduled + to_queued)),
            "transition_task_single_fenced": _summary(single),
            "get_task_instance": _summary(reads),
            "heartbeat": _summary(beats),
        }
    finally:
        await store.close()


async def seed_runs(url: str, count: int, dags: int = 50) -> None:
    """Insert ``count`` runs with COPY (states: 97% success, 2% failed, 1% running)."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        rng = random.Random(7)
        now = time.time()
        records = []
        for i in range(count):
            roll = rng.random()
            state = "success" if roll < 0.97 else "failed" if roll < 0.99 else "running"
            created = now - (count - i) * 60
            records.append(
                (f"dag_{i % dags:03d}", f"scheduled__{i}", state, "scheduled", created, "{}",
                 created, created, created + 30, None)
            )  # fmt: skip
        await conn.copy_records_to_table(
            "dag_runs",
            records=records,
            columns=[
                "dag_id", "run_id", "state", "run_type", "logical_date", "conf", "created_at",
                "started_at", "ended_at", "message",
            ],
        )  # fmt: skip
        await conn.execute("ANALYZE dag_runs")
    finally:
        await conn.close()


async def bench_list_runs(url: str, count: int, samples: int = 500) -> dict[str, Any]:
    store = await Store.open(url)
    try:
        t0 = time.perf_counter()
        await seed_runs(url, count)
        seed_s = time.perf_counter() - t0
        newest = await store.list_runs(limit=1)
        top = newest[0].pk
        rng = random.Random(11)
        results: dict[str, Any] = {"runs": count, "seed_seconds": round(seed_s, 2)}
        cases: dict[str, Any] = {
            "newest_page": lambda: store.list_runs(limit=100),
            "deep_keyset_page": lambda: store.list_runs(limit=100, before_pk=rng.randint(100, top)),
            "dag_filter_deep": lambda: store.list_runs(
                dag_id=f"dag_{rng.randint(0, 49):03d}", limit=100, before_pk=rng.randint(100, top)
            ),
            "state_running": lambda: store.list_runs(states=[RunState.RUNNING], limit=100),
            "state_failed_or_running_deep": lambda: store.list_runs(
                states=[RunState.FAILED, RunState.RUNNING],
                limit=100,
                before_pk=rng.randint(100, top),
            ),
            "dag_and_state": lambda: store.list_runs(
                dag_id=f"dag_{rng.randint(0, 49):03d}", states=[RunState.SUCCESS], limit=100
            ),
        }
        for name, call in cases.items():
            for _ in range(20):
                await call()
            timings = []
            for _ in range(samples):
                t1 = time.perf_counter()
                page = await call()
                timings.append(time.perf_counter() - t1)
            assert page is not None
            results[name] = _summary(timings)
        return results
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    if args.runs < 1000:  # the deep pages are drawn from below the first 100 runs' pks
        parser.error(f"--runs must be at least 1000, got {args.runs}")

    from tests.support.postgres import start_postgres

    server = None
    if args.postgres_url:
        admin_dsn = args.postgres_url
    else:
        server = start_postgres()
        admin_dsn = server.admin_dsn
    out: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out["sqlite"] = await bench_transitions(f"sqlite:///{tmp}/bench.db")

        async def fresh_db(name: str) -> str:
            conn = await asyncpg.connect(
                make_url(admin_dsn).set(drivername="postgresql").render_as_string(False)
            )
            try:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                await conn.execute(f'CREATE DATABASE "{name}"')
            finally:
                await conn.close()
            return (
                make_url(admin_dsn)
                .set(drivername="postgresql+asyncpg", database=name)
                .render_as_string(hide_password=False)
            )

        out["postgresql"] = await bench_transitions(await fresh_db("leoflow_bench_tx"))
        out["postgresql_list_runs"] = await bench_list_runs(
            await fresh_db("leoflow_bench_runs"), args.runs
        )
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
