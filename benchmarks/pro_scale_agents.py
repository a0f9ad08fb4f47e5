"""The simulated pod agents of ``pro_scale_cluster.py``, in a process of their own.

A pod's agent runs in the pod, not in the apiserver: with the agents' gRPC in the
fake apiserver's process (a quarter of its CPU), every create waited behind their
work, and the figure meant to be the scheduler's lag was partly the fake's queue.
This process plays them (``tests/fakekube/agents.py``, unchanged) for the kubelet,
which hands each pod over as one JSON line on stdin and reads the container's result
back on stdout:

    in:  {"id": N, "name": pod, "uid": uid, "env": {name: value}}
         | {"op": "hold"|"release"} | {"op": "cpu"}
    out: {"id": N, "result": [exit code, reason, message]} | {"cpu_s": seconds}
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakekube.agents import SimulatedAgents  # noqa: E402


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agents = SimulatedAgents()
    tasks: set[asyncio.Task[None]] = set()
    gc.collect()
    gc.freeze()

    async def play(request: dict[str, Any]) -> None:
        pod = {"metadata": {"name": request["name"], "uid": request["uid"]}}
        container = {"env": [{"name": k, "value": v} for k, v in request["env"].items()]}
        result = await agents.run(pod, container)
        sys.stdout.write(json.dumps({"id": request["id"], "result": list(result)}) + "\n")
        sys.stdout.flush()

    while line := await reader.readline():
        request = json.loads(line)
        op = request.get("op")
        if op == "hold":
            agents.hold()
        elif op == "release":
            agents.release()
        elif op == "cpu":
            sys.stdout.write(json.dumps({"cpu_s": time.process_time()}) + "\n")
            sys.stdout.flush()
        else:
            task = asyncio.create_task(play(request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    await agents.close()


if __name__ == "__main__":
    asyncio.run(main())
