"""The fake cluster for ``bench_pro_scale.py``, in its own process.

A fake apiserver (task namespace under PSA ``restricted``) and its kubelet; every
pod's agent is simulated over gRPC (``tests/fakekube/agents.py``) in a process of
its own (``pro_scale_agents.py``), as a pod's agent runs outside the apiserver. The
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


AGENTS = Path(__file__).resolve().parent / "pro_scale_agents.py"


class RemoteAgents(SimulatedAgents):
    """SimulatedAgents whose conversations run in ``pro_scale_agents.py``'s process."""

    def __init__(self) -> None:
        super().__init__()
        self._proc: asyncio.subprocess.Process | None = None
        self._waiting: dict[int, asyncio.Future[tuple[int, str, str]]] = {}
        self._cpu: asyncio.Future[float] | None = None
        self._next = 0
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, str(AGENTS), cwd=REPO,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            answer = json.loads(line)
            if "cpu_s" in answer:
                assert self._cpu is not None
                self._cpu.set_result(float(answer["cpu_s"]))
                continue
            code, reason, message = answer["result"]
            self._waiting.pop(answer["id"]).set_result((int(code), reason, message))

    def hold(self) -> None:
        self._send({"op": "hold"})

    async def cpu_s(self) -> float:
        """The agents' process's CPU time so far."""
        self._cpu = asyncio.get_running_loop().create_future()
        self._send({"op": "cpu"})
        return await self._cpu

    def release(self) -> None:
        self._send({"op": "release"})

    async def run(self, pod: dict[str, Any], container: dict[str, Any]) -> tuple[int, str, str]:
        self._next += 1
        future: asyncio.Future[tuple[int, str, str]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        env = {v["name"]: str(v["value"]) for v in container.get("env") or [] if "value" in v}
        meta = pod["metadata"]
        self._send({"id": self._next, "name": meta["name"], "uid": meta["uid"], "env": env})
        result = await future
        if result[0] == 0:
            self.completed += 1
        else:
            self.failed.append(f"{meta['name']}: exit {result[0]} {result[1]}")
        return result

    async def close(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                await asyncio.wait_for(self._proc.wait(), 20)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        if self._reader is not None:
            self._reader.cancel()


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
    agents = RemoteAgents()
    await agents.start()
    async with FakeApiServer(restricted_namespaces=[NS]) as srv:
        kubelet = FakeKubelet(srv, default=Outcome.agent(), namespace=NS, agents=agents)
        async with kubelet:
            # Its imports frozen (as leoflow.runtime.heap does the scheduler's): full
            # collections stalled this process for up to 0.6 s, creates waiting behind.
            # And no cyclic collector after that: the stored pods still grew each full
            # collection (2,000 pods: stalls of 100-290 ms, the creates sent meanwhile
            # stored in a clump, up to 0.3 s late), a pause a real apiserver's
            # concurrent GC does not make, which the lag figures counted as the
            # scheduler's. What this process makes is JSON trees and request plumbing,
            # freed by reference counting; the few cycles wait for the exit.
            gc.collect()
            gc.freeze()
            gc.disable()
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
                    answer = stats(srv, agents) | {"agents_cpu_s": await agents.cpu_s()}
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
