"""Scheduler failover without Kubernetes: the database lease.

Two real `leoflow scheduler` processes (agent executor, no Kubernetes) on one
embedded PostgreSQL with client-go's default timings (15 s lease, 10 s renew
deadline, 2 s retry), as `bench_failover.py` measures the Lease. The leader is
killed with SIGKILL (no release: the lease row must expire by the follower's
clock) or stopped with SIGTERM (it releases the row), and the time until the other
holds the lease is read from the row itself.

    python benchmarks/bench_db_failover.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from leoflow.store import Store  # noqa: E402
from tests.support.postgres import start_postgres  # noqa: E402

LEOFLOW = str(Path(sys.executable).parent / "leoflow")


def spawn(name: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [LEOFLOW, "scheduler"],
        env={**env, "LEOFLOW_IDENTITY": name, "LEOFLOW_HOME": str(logs / f"home-{name}")},
        stdout=open(logs / f"{name}.log", "ab"),
        stderr=subprocess.STDOUT,
    )


async def wait_holder(store: Store, name: str, timeout: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if (await store.get_lease()).holder == name:
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise SystemExit(f"{name} did not take the lease within {timeout}s")


async def main(rounds: int) -> None:
    server = start_postgres()
    try:
        url = await server.create_database()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
            env.pop("KUBERNETES_SERVICE_HOST", None)
            env.update(
                PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
                LEOFLOW_DATABASE_URL=url,
                LEOFLOW_EXECUTOR="agent",
                LEOFLOW_AGENT_LISTEN="127.0.0.1:0",
            )
            store = await Store.open(url)
            procs: dict[str, subprocess.Popen[bytes]] = {}
            kill9: list[float] = []
            sigterm: list[float] = []
            try:
                procs["a"] = spawn("a", env, root)
                await wait_holder(store, "a")
                procs["b"] = spawn("b", env, root)
                leader, follower = "a", "b"
                for _ in range(rounds):
                    await asyncio.sleep(6)  # the (re)started follower is up and watching the row
                    procs[leader].send_signal(signal.SIGKILL)
                    procs[leader].wait()
                    kill9.append(await wait_holder(store, follower))
                    procs[leader] = spawn(leader, env, root)
                    leader, follower = follower, leader

                    await asyncio.sleep(6)
                    procs[leader].send_signal(signal.SIGTERM)
                    sigterm.append(await wait_holder(store, follower))
                    procs[leader].wait(30)
                    procs[leader] = spawn(leader, env, root)
                    leader, follower = follower, leader
            finally:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                await store.close()
        await server.drop_database(url)
    finally:
        server.stop()
    print(
        json.dumps(
            {
                "leadership": "database lease (PostgreSQL)",
                "lease_duration_s": 15,
                "renew_deadline_s": 10,
                "retry_period_s": 2,
                "rounds": rounds,
                "after_kill9_s": [round(x, 2) for x in kill9],
                "after_kill9_s_median": round(statistics.median(kill9), 2),
                "after_sigterm_s": [round(x, 2) for x in sigterm],
                "after_sigterm_s_median": round(statistics.median(sigterm), 2),
                "bound_kill9_s": "<= 19 (lease + 2 retries)",
                "target_sigterm_s": "< 3",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args().rounds))
