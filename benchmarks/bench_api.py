"""API latency over a real socket; prints one JSON document.

    .venv/bin/python benchmarks/bench_api.py [--postgres-url URL] [--runs 100000]

Seeds PostgreSQL (embedded unless --postgres-url / LEOFLOW_TEST_DATABASE_URL) with
``--runs`` runs of 50 DAGs (3 task instances each) plus 20 wide runs of 300 task
instances, with COPY. Then starts the real ``leoflow api`` process (``serve_api``:
uvicorn on uvloop, bearer-token auth, its own store) and measures, one request at a
time from an httpx client in this process, p50/p99 latency of:

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
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from leoflow.api.auth import hash_token  # noqa: E402
from leoflow.store import Store  # noqa: E402

DAGS = 50
WIDE_RUNS = 20
WIDE_TASKS = 300
TOKEN = "bench-viewer-token"


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


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def seed(url: str, runs: int) -> dict[str, Any]:
    """Runs (97% success, 2% failed, 1% running) and their task instances, by COPY."""
    conn = await asyncpg.connect(_dsn(url))
    try:
        rng = random.Random(7)
        now = time.time()
        run_rows = []
        for i in range(runs + WIDE_RUNS):
            roll = rng.random()
            state = "success" if roll < 0.97 else "failed" if roll < 0.99 else "running"
            created = now - (runs + WIDE_RUNS - i) * 60
            dag = "wide" if i >= runs else f"dag_{i % DAGS:03d}"
            run_rows.append(
                (dag, f"scheduled__{i}", state, "scheduled", created, "{}", created, created,
                 created + 30, None)
            )  # fmt: skip
        await conn.copy_records_to_table(
            "dag_runs",
            records=run_rows,
            columns=[
                "dag_id", "run_id", "state", "run_type", "logical_date", "conf", "created_at",
                "started_at", "ended_at", "message",
            ],
        )  # fmt: skip
        pks = await conn.fetch("SELECT pk, dag_id, run_id, created_at FROM dag_runs ORDER BY pk")
        ti_rows = []
        for pk, dag_id, run_id, created in pks:
            width = WIDE_TASKS if dag_id == "wide" else 3
            for t in range(width):
                ti_rows.append(
                    (pk, dag_id, run_id, f"task_{t:03d}", "success", 1, 1, "default_pool", 1, 0,
                     created, created, created, created + 10, created + 10, 0, "success")
                )  # fmt: skip
        await conn.copy_records_to_table(
            "task_instances",
            records=ti_rows,
            columns=[
                "run_pk", "dag_id", "run_id", "task_id", "state", "try_number", "max_tries",
                "pool", "pool_slots", "priority", "ready_at", "queued_at", "started_at",
                "ended_at", "updated_at", "exit_code", "reason",
            ],
        )  # fmt: skip
        await conn.execute("ANALYZE dag_runs")
        await conn.execute("ANALYZE task_instances")
        return {"runs": len(run_rows), "task_instances": len(ti_rows)}
    finally:
        await conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_api(url: str, home: Path) -> tuple[asyncio.subprocess.Process, str]:
    tokens = home / "tokens.yaml"
    tokens.write_text(f"tokens: [{{name: bench, role: viewer, sha256: {hash_token(TOKEN)}}}]\n")
    port = _free_port()
    env = {
        **os.environ,
        "LEOFLOW_HOME": str(home),
        "LEOFLOW_DATABASE_URL": url,
        "LEOFLOW_API_LISTEN": f"127.0.0.1:{port}",
        "LEOFLOW_API_TOKENS_FILE": str(tokens),
        "PYTHONPATH": str(REPO),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from leoflow.api.server import serve_api; from leoflow.settings import load_settings;"
        "raise SystemExit(serve_api(load_settings()))",
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(600):
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return proc, base
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    proc.kill()
    raise RuntimeError("leoflow api did not become ready")


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
    return _summary(timings)


async def bench(url: str, runs: int, samples: int) -> dict[str, Any]:
    store = await Store.open(url)  # migrates the fresh database
    await store.close()
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
                out["task_instances_next_page"] = _summary(timings)
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

    from tests.support.postgres import start_postgres

    server = None
    if args.postgres_url:
        admin_dsn = _dsn(args.postgres_url)
    else:
        server = start_postgres()
        admin_dsn = server.admin_dsn
    try:
        name = "leoflow_bench_api"
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
    print(json.dumps({"postgresql_api": out}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
