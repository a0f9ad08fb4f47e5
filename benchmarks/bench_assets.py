"""Asset-triggered runs at scale; prints one JSON document.

    .venv/bin/python benchmarks/bench_assets.py [--assets 1000] [--dags 200] [--rounds 50]
        [--flood 10000]

A SQLite store holds ``--dags`` DAGs, each scheduled on ``{any: [...]}`` of 5 of
``--assets`` assets. A scheduler (its loop not started: the poll is driven here, as
the loop would run it after a write) reads them once. Then:

- ``rounds``: an event on one asset, then polls until every DAG scheduled on that
  asset has its new run. ``polls_to_run`` is how many polls that took (p50, p99:
  1 means the first poll after the event made the runs); ``poll_ms`` the CPU time of
  one such poll.
- ``flood``: ``--flood`` events spread over every asset, recorded one transaction
  each (as the API would), then one poll. ``runs_created`` must equal the number of
  DAGs (one run each, however many events), and ``maxrss_growth_kb`` is how much the
  process' peak RSS grew over the flood and its poll (bounded: the poll reads one
  aggregate per asset, never the events).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leoflow.domain.catalogue import spec_hash  # noqa: E402
from leoflow.domain.dag import DagSpec  # noqa: E402
from leoflow.executor.subprocess import SubprocessExecutor  # noqa: E402
from leoflow.scheduler.core import Scheduler, SchedulerConfig  # noqa: E402
from leoflow.store import Store  # noqa: E402


def _spec(dag_id: str, assets: list[str]) -> DagSpec:
    return DagSpec.model_validate(
        {
            "dag_id": dag_id,
            "schedule": {"assets": {"any": assets}},
            "max_active_runs": 100_000,
            "tasks": {"t": {"task_id": "t", "command": "true"}},
        }
    )


async def _asset_runs(store: Store) -> int:
    return sum(1 for r in await store.list_runs(limit=1_000_000) if r.run_type == "asset")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    uris = [f"s3://bench/asset{i:04d}" for i in range(args.assets)]
    consumers: dict[str, list[str]] = {uri: [] for uri in uris}
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(f"sqlite:///{Path(tmp) / 'leoflow.db'}")
        try:
            for d in range(args.dags):
                dag_id = f"dag{d:04d}"
                chosen = rng.sample(uris, 5)
                for uri in chosen:
                    consumers[uri].append(dag_id)
                text = _spec(dag_id, chosen).model_dump_json()
                await store.upsert_dag(
                    dag_id, fileloc=dag_id, spec_json=text, spec_hash=spec_hash(text), source=None
                )
            epoch = await store.take_office("bench")
            scheduler = Scheduler(
                store, SubprocessExecutor(kill_grace=1.0), SchedulerConfig(), epoch=epoch
            )
            poll = scheduler._poll
            await poll.run()
            polls_to_run: list[int] = []
            poll_ms: list[float] = []
            produced = [uri for uri in uris if consumers[uri]]
            for _ in range(args.rounds):
                uri = rng.choice(produced)
                before = await _asset_runs(store)
                await store.add_asset_event(uri, extra=None, idempotency_key=None, created_by="b")
                polls = 0
                while await _asset_runs(store) < before + len(consumers[uri]):
                    started = time.process_time()
                    await poll.run()
                    poll_ms.append((time.process_time() - started) * 1000)
                    polls += 1
                    if polls > 10:
                        raise AssertionError(f"no run after 10 polls for {uri}")
                polls_to_run.append(polls)
            before = await _asset_runs(store)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            started = time.monotonic()
            for index in range(args.flood):
                await store.add_asset_event(
                    uris[index % len(uris)], extra=None, idempotency_key=f"f{index}", created_by="b"
                )
            flood_s = time.monotonic() - started
            cpu = time.process_time()
            await poll.run()
            flood_poll_ms = (time.process_time() - cpu) * 1000
            created = await _asset_runs(store) - before
            growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
        finally:
            await store.close()
    polls_to_run.sort()
    return {
        "assets": args.assets,
        "dags": args.dags,
        "rounds": args.rounds,
        "polls_to_run": {
            "p50": polls_to_run[len(polls_to_run) // 2],
            "p99": polls_to_run[min(len(polls_to_run) - 1, int(len(polls_to_run) * 0.99))],
        },
        "poll_ms_median": round(statistics.median(poll_ms), 2),
        "flood_events": args.flood,
        "flood_record_seconds": round(flood_s, 1),
        "flood_poll_ms": round(flood_poll_ms, 1),
        "runs_created": created,
        "dags_with_an_asset": len({d for uri in uris for d in consumers[uri]}),
        "maxrss_growth_kb": growth,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=1000)
    parser.add_argument("--dags", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--flood", type=int, default=10_000)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
