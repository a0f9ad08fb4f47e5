"""Simulated pod agents: what ``leoflow agent`` says over the wire, without its process.

A real task pod runs ``leoflow agent`` (a Python process: ~0.3 s and ~40 MB each),
which dials the control plane's agent endpoint with the pod's ticket. For a thousand
pods on one shared 2-core machine that is the benchmark's whole cost, so
:class:`SimulatedAgents` plays the agent's part of the conversation instead, on the
agent's own :class:`~leoflow.agent.channel.Channel` (one stream per pod, as a pod's
agent has): Exchange the ticket, Start, then Complete with exit 0. The kubelet then
ends the container exactly as it ends after a real agent exits 0: terminated,
exitCode 0, reason Completed, no termination message (the agent writes none).

What it leaves out: the task's own process (the command is never run), log chunks
(the command prints nothing) and heartbeats (each task ends well inside one
heartbeat interval). ``hold()`` keeps every agent between Start and Complete until
``release()``, so a benchmark can have all its pods running at once.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from leoflow.agent.channel import Channel
from leoflow.protocol.agent_v1 import pb

JsonObj = dict[str, Any]


def _env(container: JsonObj) -> dict[str, str]:
    return {v["name"]: str(v["value"]) for v in container.get("env") or [] if "value" in v}


class SimulatedAgents:
    """Every pod's agent conversation, in this process; see the module docstring."""

    def __init__(self, *, connect_timeout: float = 60.0) -> None:
        self.connect_timeout = connect_timeout
        self.completed = 0
        self.failed: list[str] = []
        self._released = asyncio.Event()
        self._released.set()
        self._channels: set[Channel] = set()

    def hold(self) -> None:
        """From now on each agent waits after Start until :meth:`release`."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    async def run(self, pod: JsonObj, container: JsonObj) -> tuple[int, str, str]:
        """One pod's agent, start to finish: the container's (exit code, reason, message)."""
        env = _env(container)
        meta = pod["metadata"]
        channel = Channel(env["LEOFLOW_AGENT_ENDPOINT"], connect_timeout=self.connect_timeout)
        self._channels.add(channel)
        try:
            exchanged = await channel.call(
                "exchange", pb.ExchangeRequest(ticket=env["LEOFLOW_AGENT_TICKET"]), None,
                resend=False,
            )  # fmt: skip
            token = exchanged.session_token
            start = pb.StartRequest(
                pod_name=meta["name"], pod_uid=meta["uid"], hostname=meta["name"], pid=os.getpid()
            )
            await channel.call("start", start, token)
            await self._released.wait()
            await channel.call("complete", pb.CompleteRequest(exit_code=0), token)
        except Exception as exc:  # the agent's exit codes 3 and 4: unreachable, refused
            self.failed.append(f"{meta['name']}: {type(exc).__name__}: {exc}")
            return 4, "Error", ""
        finally:
            self._channels.discard(channel)
            await channel.close()
        self.completed += 1
        return 0, "Completed", ""

    async def close(self) -> None:
        for channel in list(self._channels):
            await channel.close()
