"""The fake cluster for ``bench_pro_scale.py``, in its own process.

A fake apiserver (task namespace under PSA ``restricted``), its kubelet, and every
pod's agent simulated over gRPC (``tests/fakekube/agents.py``), so that the
scheduler's process holds only the scheduler and its CPU time is its own.

Talks JSON lines: prints ``{"url": ...}`` once it listens, then answers each line
read on stdin: ``{"op": "hold"|"release"|"running"|"stats"|"quit"}``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakekube import FakeApiServer, FakeKubelet, Outcome  # noqa: E402
from tests.fakekube.agents import SimulatedAgents  # noqa: E402

NS = "leoflow-tasks"


def stats(srv: FakeApiServer, agents: SimulatedAgents) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for (verb, group, resource), n in srv.counts.items():
        counts[f"{verb} {group + '/' if group else ''}{resource}"] = n
    return {
        "requests": counts,
        "open_watches": srv.open_watches,
        "created_at": {name: t for (_, name), t in srv.registry.created_at.items()},
        "agents_completed": agents.completed,
        "agents_failed": agents.failed[:5],
        "cpu_s": time.process_time(),
    }


def running(srv: FakeApiServer) -> int:
    return srv.store.count("pods", NS, lambda p: (p.get("status") or {}).get("phase") == "Running")


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agents = SimulatedAgents()
    async with FakeApiServer(restricted_namespaces=[NS]) as srv:
        kubelet = FakeKubelet(srv, default=Outcome.agent(), namespace=NS, agents=agents)
        async with kubelet:
            # Its imports frozen (as leoflow.runtime.heap does the scheduler's): full
            # collections stalled this process for up to 0.6 s, creates waiting behind.
            gc.collect()
            gc.freeze()
            print(json.dumps({"url": srv.url}), flush=True)
            while line := await reader.readline():
                op = json.loads(line)["op"]
                answer: dict[str, Any] = {"ok": True}
                if op == "hold":
                    agents.hold()
                elif op == "release":
                    agents.release()
                elif op == "running":
                    answer = {"running": running(srv)}
                elif op == "stats":
                    answer = stats(srv, agents)
                elif op == "quit":
                    break
                print(json.dumps(answer), flush=True)
        await agents.close()


if __name__ == "__main__":
    profile_to = os.environ.get("LEOFLOW_BENCH_CLUSTER_PROFILE")
    if profile_to:
        import cProfile

        cProfile.run("asyncio.run(main())", profile_to)
    else:
        asyncio.run(main())
