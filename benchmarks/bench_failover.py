"""Scheduler failover: how long until another replica leads.

Two real `leoflow scheduler` processes (Kubernetes executor, client-go's default
Lease timings: 15 s lease, 10 s renew deadline, 2 s retry) against the fake
kube-apiserver from the test suite, sharing one SQLite database. The leader is
killed with SIGKILL (no release: the Lease must expire) or stopped with SIGTERM
(it releases the Lease), and the time until the other holds the Lease is taken
from the Lease itself.

    python benchmarks/bench_failover.py [--rounds 3]
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

from leoflow.kube.client import KubeClient  # noqa: E402
from tests.fakekube import FakeApiServer  # noqa: E402

LEOFLOW = str(Path(sys.executable).parent / "leoflow")
LEASE = "leoflow-scheduler"


def spawn(name: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [LEOFLOW, "scheduler"],
        env={**env, "LEOFLOW_IDENTITY": name},
        stdout=open(logs / f"{name}.log", "ab"),
        stderr=subprocess.STDOUT,
    )


async def holder(client: KubeClient) -> str | None:
    lease = await client.get_lease(LEASE)
    return None if lease is None else lease["spec"].get("holderIdentity")


async def wait_holder(client: KubeClient, name: str, timeout: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await holder(client) == name:
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise SystemExit(f"{name} did not take the lease within {timeout}s")


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with FakeApiServer(token="bench") as server:
            kubeconfig = server.kubeconfig(root / "kubeconfig")
            env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
            env.update(
                KUBECONFIG=str(kubeconfig),
                LEOFLOW_HOME=str(root / "home"),
                LEOFLOW_EXECUTOR="kubernetes",
                LEOFLOW_TOKEN_SIGNING_KEY="bench-signing-key-0123456789abcdef",
                LEOFLOW_TASK_NAMESPACE="leoflow-tasks",
                LEOFLOW_RELEASE_NAMESPACE="leoflow-system",
                LEOFLOW_AGENT_LISTEN="127.0.0.1:0",
            )
            env.pop("KUBERNETES_SERVICE_HOST", None)
            client = KubeClient(
                server.configuration(),
                task_namespace="leoflow-tasks",
                release_namespace="leoflow-system",
            )
            procs: dict[str, subprocess.Popen[bytes]] = {}
            kill9: list[float] = []
            sigterm: list[float] = []
            try:
                procs["a"] = spawn("a", env, root)
                await wait_holder(client, "a")
                procs["b"] = spawn("b", env, root)
                leader, follower = "a", "b"
                for _ in range(rounds):
                    await asyncio.sleep(3)  # the follower has observed the Lease for a while
                    procs[leader].send_signal(signal.SIGKILL)
                    procs[leader].wait()
                    kill9.append(await wait_holder(client, follower))
                    procs[leader] = spawn(leader, env, root)
                    leader, follower = follower, leader

                    await asyncio.sleep(3)
                    procs[leader].send_signal(signal.SIGTERM)
                    sigterm.append(await wait_holder(client, follower))
                    procs[leader].wait(30)
                    procs[leader] = spawn(leader, env, root)
                    leader, follower = follower, leader
            finally:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                await client.close()
    print(
        json.dumps(
            {
                "lease_duration_s": 15,
                "renew_deadline_s": 10,
                "retry_period_s": 2,
                "rounds": rounds,
                "after_kill9_s": [round(x, 2) for x in kill9],
                "after_kill9_s_median": round(statistics.median(kill9), 2),
                "after_sigterm_s": [round(x, 2) for x in sigterm],
                "after_sigterm_s_median": round(statistics.median(sigterm), 2),
                "target_kill9_s": "<= 17 (lease + retry)",
                "target_sigterm_s": "< 3",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args().rounds))
