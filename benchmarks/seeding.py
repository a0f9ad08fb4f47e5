"""What the API and web UI benchmarks share: the seeded PostgreSQL, the real
``leoflow api`` process, and the statistics.

``fresh_database(name)`` gives an empty database on the embedded server (or on
``--postgres-url`` / LEOFLOW_TEST_DATABASE_URL); ``seed`` fills it by COPY with
``runs`` runs of ``DAGS`` DAGs (3 task instances each) plus ``WIDE_RUNS`` runs of
the ``wide`` DAG (``WIDE_TASKS`` task instances each); ``add_dags`` adds the DAG
rows that pages need; ``start_api`` starts the server with one viewer token.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

from leoflow.api.auth import hash_token
from leoflow.dagfile.loader import parse_dag
from leoflow.store import Store

REPO = Path(__file__).resolve().parents[1]
DAGS = 50
WIDE_RUNS = 20
WIDE_TASKS = 300
TOKEN = "bench-viewer-token"


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.50), 3),
        "p95_ms": round(pct(ms, 0.95), 3),
        "p99_ms": round(pct(ms, 0.99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def fresh_database(name: str, postgres_url: str | None) -> AsyncIterator[str]:
    """An empty database ``name`` (dropped first if there), migrated; yields its URL."""
    from tests.support.postgres import start_postgres

    server = None
    if postgres_url:
        admin_dsn = dsn(postgres_url)
    else:
        server = start_postgres()
        admin_dsn = server.admin_dsn
    try:
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
        store = await Store.open(url)  # migrates the fresh database
        await store.close()
        yield url
    finally:
        if server is not None:
            server.stop()


async def seed(url: str, runs: int) -> dict[str, Any]:
    """Runs (97% success, 2% failed, 1% running) and their task instances, by COPY."""
    conn = await asyncpg.connect(dsn(url))
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
        run_columns = (
            "dag_id", "run_id", "state", "run_type", "logical_date", "conf", "created_at",
            "started_at", "ended_at", "message",
        )  # fmt: skip
        await conn.copy_records_to_table("dag_runs", records=run_rows, columns=run_columns)
        pks = await conn.fetch("SELECT pk, dag_id, run_id, created_at FROM dag_runs ORDER BY pk")
        ti_rows = []
        for pk, dag_id, run_id, created in pks:
            width = WIDE_TASKS if dag_id == "wide" else 3
            for t in range(width):
                ti_rows.append(
                    (pk, dag_id, run_id, f"task_{t:03d}", "success", 1, 1, "default_pool", 1, 0,
                     created, created, created, created + 10, created + 10, 0, "success")
                )  # fmt: skip
        ti_columns = (
            "run_pk", "dag_id", "run_id", "task_id", "state", "try_number", "max_tries",
            "pool", "pool_slots", "priority", "ready_at", "queued_at", "started_at",
            "ended_at", "updated_at", "exit_code", "reason",
        )  # fmt: skip
        await conn.copy_records_to_table("task_instances", records=ti_rows, columns=ti_columns)
        await conn.execute("ANALYZE dag_runs")
        await conn.execute("ANALYZE task_instances")
        return {"runs": len(run_rows), "task_instances": len(ti_rows)}
    finally:
        await conn.close()


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
