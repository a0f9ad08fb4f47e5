"""The scheduler's store poll with many idle DAGs; prints one JSON document.

    .venv/bin/python benchmarks/bench_poll.py [--dags 1000] [--polls 50] [--repeat 5]
        [--schedule CRON] [--db sqlite|postgres] [--postgres-url URL]

A store (a SQLite file, or with ``--db postgres`` a fresh database on the embedded
PostgreSQL of tests/support or on ``--postgres-url``) holds ``--dags`` active DAGs
(10 tasks each, no schedule, no runs). A scheduler that has read them once polls
the store ``--polls`` times; the figure is CPU time of this process (the
scheduler's; a PostgreSQL server's own is not in it) per poll, median of
``--repeat`` rounds. Nothing changed between polls, so a poll should cost the same
with 10 DAGs or 1,000 (issue 13 item 6: at most 1 ms with 1,000).
``--schedule '0 0 1 1 *'`` gives every DAG a cron that is not due, so the poll's
cron check is measured too.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leoflow.domain.dag import DagSpec  # noqa: E402
from leoflow.executor.subprocess import SubprocessExecutor  # noqa: E402
from leoflow.scheduler.core import Scheduler, SchedulerConfig  # noqa: E402
from leoflow.store import Store  # noqa: E402
from tests.support.postgres import ENV_URL, PgServer, start_postgres  # noqa: E402


def _spec(dag_id: str, schedule: str | None = None) -> DagSpec:
    tasks = {
        f"t{i}": {"task_id": f"t{i}", "command": "true", "depends_on": [f"t{i - 1}"] if i else []}
        for i in range(10)
    }
    return DagSpec.model_validate({"dag_id": dag_id, "tasks": tasks, "schedule": schedule})


@asynccontextmanager
async def _database(server: PgServer | None) -> AsyncIterator[str]:
    """A fresh, empty database: a SQLite file, or one on the PostgreSQL server."""
    if server is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'leoflow.db'}"
        return
    url = await server.create_database()
    try:
        yield url
    finally:
        await server.drop_database(url)


async def _round(
    dags: int, polls: int, schedule: str | None, server: PgServer | None
) -> dict[str, float]:
    async with _database(server) as url:
        store = await Store.open(url)
        try:
            for i in range(dags):
                text = _spec(f"dag_{i:05d}", schedule).model_dump_json()
                await store.upsert_dag(
                    f"dag_{i:05d}",
                    fileloc=f"dag_{i:05d}.yaml",
                    spec_json=text,
                    spec_hash=hashlib.sha256(text.encode()).hexdigest(),
                    source=None,
                )
            epoch = await store.take_office("bench")
            scheduler = Scheduler(store, SubprocessExecutor(), SchedulerConfig(), epoch=epoch)
            await scheduler._poll.run()  # the first read parses every spec once
            await _settle(store)
            await scheduler._poll.run()  # the poll after the probe can tell reads all
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(polls):
                await scheduler._poll.run()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            known = scheduler.book.dags
            assert len(known) == dags
            return {"cpu_ms": cpu / polls * 1000, "wall_ms": wall / polls * 1000}
        finally:
            await store.close()


async def _settle(store: Store) -> None:
    """Let a change probe that listens (PostgreSQL) finish connecting, so the timed
    polls measure the steady state and not its start."""
    wait = getattr(store.changes, "wait_listening", None)
    if wait is not None and not await wait():
        raise SystemExit("the change probe does not listen: see the log")


def _server(db: str, postgres_url: str | None) -> PgServer | None:
    if db == "sqlite":
        return None
    if postgres_url:
        return PgServer(admin_dsn=make_url(postgres_url).set(drivername="postgresql")
                        .render_as_string(hide_password=False))  # fmt: skip
    return start_postgres()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dags", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--schedule", default=None)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default=os.environ.get(ENV_URL))
    args = parser.parse_args()
    server = _server(args.db, args.postgres_url)
    try:
        rounds = [
            asyncio.run(_round(args.dags, args.polls, args.schedule, server))
            for _ in range(args.repeat)
        ]
    finally:
        if server is not None:
            server.stop()
    result: dict[str, Any] = {
        "benchmark": "poll",
        "dags": args.dags,
        "polls_per_round": args.polls,
        "rounds": args.repeat,
        "schedule": args.schedule,
        "db": args.db,
        "load_average": os.getloadavg(),
        "cpu_ms_per_poll_median": round(statistics.median(r["cpu_ms"] for r in rounds), 3),
        "wall_ms_per_poll_median": round(statistics.median(r["wall_ms"] for r in rounds), 3),
        "cpu_ms_per_poll_rounds": [round(r["cpu_ms"], 3) for r in rounds],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
