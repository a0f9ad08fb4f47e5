"""API latency over a real socket; prints one JSON document.

    .venv/bin/python benchmarks/bench_api.py [--postgres-url URL] [--runs 100000]

Seeds PostgreSQL (embedded unless --postgres-url / LEOFLOW_TEST_DATABASE_URL) with
``--runs`` runs of 50 DAGs (3 task instances each) plus 20 wide runs of 300 task
instances, with COPY (benchmarks/seeding.py, shared with bench_ui.py). Then starts
the real ``leoflow api`` process (``serve_api``: uvicorn on uvloop, bearer-token
auth, its own store) and measures, one request at a time from an httpx client in
this process, p50/p99 latency of:

* GET /api/v1/runs, page of 100: newest, deep keyset (``before``), per DAG, per state;
* GET .../runs/{run}/tasks, page of 100: first page and the next (``after``).

Target: p99 < 50 ms for a page of 100.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from benchmarks.seeding import (  # noqa: E402
    DAGS,
    TOKEN,
    WIDE_RUNS,
    fresh_database,
    seed,
    start_api,
    summary,
)


async def measure(
    call: Callable[[], Awaitable[httpx.Response]], samples: int, warmup: int = 50
) -> dict[str, float]:
    for _ in range(warmup):
        (await call()).raise_for_status()
    timings = []
    for _ in range(samples):
        t0 = time.perf_counter()
        response = await call()
        timings.append(time.perf_counter() - t0)
        response.raise_for_status()
    return summary(timings)


async def bench(url: str, runs: int, samples: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = await seed(url, runs)
    out["seed_seconds"] = round(time.perf_counter() - t0, 2)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_api(url, Path(tmp))
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
                newest = (await client.get("/api/v1/runs", params={"limit": 1})).json()
                top = newest["runs"][0]["pk"]
                rng = random.Random(11)
                wide_ids = [f"scheduled__{runs + i}" for i in range(WIDE_RUNS)]
                first = (
                    await client.get(f"/api/v1/dags/wide/runs/{wide_ids[0]}/tasks?limit=100")
                ).json()
                assert len(first["task_instances"]) == 100 and first["next_cursor"] is not None

                async def wide_first_page() -> httpx.Response:
                    run_id = rng.choice(wide_ids)
                    return await client.get(
                        f"/api/v1/dags/wide/runs/{run_id}/tasks", params={"limit": 100}
                    )

                cases: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
                    "runs_newest_page": lambda: client.get("/api/v1/runs", params={"limit": 100}),
                    "runs_deep_keyset_page": lambda: client.get(
                        "/api/v1/runs", params={"limit": 100, "before": rng.randint(200, top)}
                    ),
                    "runs_dag_filter_deep": lambda: client.get(
                        "/api/v1/runs",
                        params={
                            "limit": 100,
                            "dag_id": f"dag_{rng.randint(0, DAGS - 1):03d}",
                            "before": rng.randint(200, top),
                        },
                    ),
                    "runs_state_running": lambda: client.get(
                        "/api/v1/runs", params={"limit": 100, "state": "running"}
                    ),
                    "task_instances_first_page": wide_first_page,
                }
                for name, call in cases.items():
                    out[name] = await measure(call, samples)
                # The "next page" case makes two requests; time only the page itself.
                timings = []
                for _ in range(samples):
                    run_id = rng.choice(wide_ids)
                    path = f"/api/v1/dags/wide/runs/{run_id}/tasks"
                    head = (await client.get(path, params={"limit": 1})).json()
                    params = {"limit": 100, "after": head["next_cursor"] + 99}
                    t1 = time.perf_counter()
                    response = await client.get(path, params=params)
                    timings.append(time.perf_counter() - t1)
                    assert len(response.json()["task_instances"]) == 100
                out["task_instances_next_page"] = summary(timings)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    worst = max(v["p99_ms"] for v in out.values() if isinstance(v, dict))
    out["worst_p99_ms"] = worst
    out["target_p99_ms"] = 50
    out["meets_target"] = worst < 50
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres-url", default=os.environ.get("LEOFLOW_TEST_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    if args.runs < 1000:  # the deep pages are drawn from below the first 100 runs' pks
        parser.error(f"--runs must be at least 1000, got {args.runs}")

    async with fresh_database("leoflow_bench_api", args.postgres_url) as url:
        out = await bench(url, args.runs, args.samples)
    print(json.dumps({"postgresql_api": out}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
