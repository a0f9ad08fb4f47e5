"""Web UI page latency over a real socket; prints one JSON document.

    .venv/bin/python benchmarks/bench_ui.py [--postgres-url URL] [--runs 100000] [--samples 100]

Seeds PostgreSQL exactly as benchmarks/bench_api.py does (``--runs`` runs of 50 DAGs,
3 task instances each, plus 20 wide runs of 300 task instances), adds the DAG rows
the pages need, starts the real ``leoflow api`` process, logs in to the UI with a
viewer token and measures, one request at a time, the full round trip (server time
plus loopback transfer) of each page: p50/p95/p99.

Target (issue 12): p95 <= 100 ms per page.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from benchmarks.bench_api import (  # noqa: E402
    DAGS,
    TOKEN,
    WIDE_RUNS,
    WIDE_TASKS,
    _dsn,
    _summary,
    seed,
    start_api,
)
from leoflow.dagfile.loader import parse_dag  # noqa: E402
from leoflow.store import Store  # noqa: E402

TARGET_P95_MS = 100


def _dag_yaml(dag_id: str, tasks: int) -> str:
    lines = [f"dag_id: {dag_id}", "tasks:"]
    for t in range(tasks):
        lines.append(f"  task_{t:03d}:")
        lines.append("    command: 'true'")
        if t:
            # A few layers: each task depends on one of the previous ten.
            lines.append(f"    depends_on: [task_{max(0, t - 1 - (t * 7) % 10):03d}]")
    return "\n".join(lines) + "\n"


async def add_dags(url: str) -> None:
    store = await Store.open(url)
    try:
        for dag_id, tasks in [*((f"dag_{i:03d}", 3) for i in range(DAGS)), ("wide", WIDE_TASKS)]:
            text = _dag_yaml(dag_id, tasks)
            spec = parse_dag(text, Path(f"{dag_id}.yaml"))
            spec_json = spec.model_dump_json()
            await store.upsert_dag(
                dag_id,
                fileloc=f"bench:{dag_id}",
                spec_json=spec_json,
                spec_hash=hashlib.sha256(spec_json.encode()).hexdigest(),
                source=text,
            )
    finally:
        await store.close()


async def measure(client: httpx.AsyncClient, paths: list[str], samples: int) -> dict[str, float]:
    rng = random.Random(5)
    for path in paths[:5]:
        (await client.get(path)).raise_for_status()
    timings = []
    for _ in range(samples):
        path = rng.choice(paths)
        t0 = time.perf_counter()
        response = await client.get(path)
        timings.append(time.perf_counter() - t0)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
    out = _summary(timings)
    ordered = sorted(t * 1000 for t in timings)
    out["p95_ms"] = round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3)
    out["bytes"] = len(response.content)
    return out


async def bench(url: str, runs: int, samples: int) -> dict[str, Any]:
    store = await Store.open(url)  # migrates the fresh database
    await store.close()
    t0 = time.perf_counter()
    out: dict[str, Any] = await seed(url, runs)
    await add_dags(url)
    out["seed_seconds"] = round(time.perf_counter() - t0, 2)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_api(url, Path(tmp))
        try:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                login = await client.post(
                    "/ui/login", json={"token": TOKEN}, headers={"Origin": base}
                )
                login.raise_for_status()
                rng = random.Random(3)
                small = [f"scheduled__{rng.randrange(runs)}" for _ in range(50)]
                wide = [f"scheduled__{runs + i}" for i in range(WIDE_RUNS)]

                def dag_of(run_id: str) -> str:
                    return f"dag_{int(run_id.split('__')[1]) % DAGS:03d}"

                cases = {
                    "dags_list": ["/", "/?page=2", "/?q=dag_01", "/?state=running"],
                    "dag_graph_grid_3_tasks": [f"/dags/dag_{i:03d}" for i in range(DAGS)],
                    "dag_graph_grid_300_tasks": ["/dags/wide"],
                    "dag_old_run_selected": [f"/dags/{dag_of(r)}?run={r}" for r in small],
                    "run_3_tasks": [f"/dags/{dag_of(r)}/runs/{r}" for r in small],
                    "run_300_tasks_page": [f"/dags/wide/runs/{r}" for r in wide],
                    "task_instance": [f"/dags/wide/runs/{r}/tasks/task_150" for r in wide],
                    "waiting": ["/waiting"],
                    "pools": ["/pools"],
                }
                for name, paths in cases.items():
                    out[name] = await measure(client, paths, samples)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    worst = max(v["p95_ms"] for v in out.values() if isinstance(v, dict))
    out["worst_p95_ms"] = worst
    out["target_p95_ms"] = TARGET_P95_MS
    out["meets_target"] = worst <= TARGET_P95_MS
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres-url", default=os.environ.get("LEOFLOW_TEST_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()

    from tests.support.postgres import start_postgres

    server = None
    if args.postgres_url:
        admin_dsn = _dsn(args.postgres_url)
    else:
        server = start_postgres()
        admin_dsn = server.admin_dsn
    try:
        name = "leoflow_bench_ui"
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        url = (
            make_url(admin_dsn)
            .set(drivername="postgresql+asyncpg", database=name)
            .render_as_string(hide_password=False)
        )
        out = await bench(url, args.runs, args.samples)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps({"postgresql_ui": {"runs_requested": args.runs, **out}}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
