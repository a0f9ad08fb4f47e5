"""``leoflow agent --warm``: a warm pod's agent, many tasks one after another.

The pod's ticket (``LEOFLOW_AGENT_TICKET``) is exchanged for a pod session token,
which can only ask for the next task of the pod's DAG and shape. Each task comes as
its own ticket and runs exactly as in a pod of its own (``TaskRun``: its own
session token, secrets, log stream, heartbeats, OOM window), one at a time, so the
cgroup's OOM counter speaks for that task alone.

Between tasks: the task's whole process group is killed and must be gone, the
emptyDir (``LEOFLOW_AGENT_EMPTY_DIR``, ``/tmp``) is emptied, and the next command's
environment is built from the container's again (``environment``), with only its
own secrets. The agent exits 0, and the pod ends, after an OOM kill, a timeout kill,
a process it could not kill or remove, ``max_tasks_per_pod`` tasks, or when the
control plane says to retire it (idle past ``idle_timeout``, its DAG paused or
deleted, a scheduler that does not know it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable

import grpc

from leoflow.agent.channel import Channel
from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.supervisor import Heartbeats, Supervisor
from leoflow.agent.task import EXIT_REFUSED, EXIT_UNREACHABLE, TaskRun, warn
from leoflow.protocol.agent_v1 import pb

# How long a killed process group may take to vanish before the pod is retired.
_GROUP_GONE_WITHIN = 5.0
_POLL = 0.02
_REDIAL_BACKOFF = 0.5


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``, read from /proc."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
                found.append(int(entry.name))
    return found


async def kill_group(pgid: int) -> bool:
    """SIGKILL the group until none of it is alive; False if some of it outlives
    ``_GROUP_GONE_WITHIN`` (a process we cannot kill or reap)."""
    deadline = time.monotonic() + _GROUP_GONE_WITHIN
    while True:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        if not group_members(pgid):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL)


def empty_dir(path: str, keep: str) -> str:
    """Remove everything in ``path`` but ``keep``; the first failure, or ""."""
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        return f"{path} could not be listed: {exc}"
    for entry in entries:
        if entry.path == keep:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError as exc:
            return f"{entry.path} could not be removed: {exc}"
    return ""


class WarmAgent:
    def __init__(self, sup: Supervisor, ticket: str, dial: Callable[[], Channel]) -> None:
        self.sup = sup
        self._ticket = ticket
        self._dial = dial
        self._token = ""
        self.done = 0
        self.empty = os.environ.get("LEOFLOW_AGENT_EMPTY_DIR", "")
        self.idle_timeout = float(os.environ.get("LEOFLOW_AGENT_IDLE_TIMEOUT", "120"))
        self.max_tasks = int(os.environ.get("LEOFLOW_AGENT_MAX_TASKS", "200"))
        self.scratch = ""
        self.retired = ""  # why this pod stopped taking work
        self._asking: asyncio.Task[str | None] | None = None

    async def run(self) -> int:
        if self.empty:
            # The agent's own scratch (tries' input and output files) stays through a
            # cleaning: a private directory inside the one emptied.
            self.scratch = os.path.join(self.empty, f".leoflow-agent-{os.getpid()}")
            os.makedirs(self.scratch, mode=0o700, exist_ok=True)
            os.environ["LEOFLOW_SCRATCH_DIR"] = self.scratch
            self._clean()  # whatever the image left there is no task's business
        try:
            got = await self.sup.channel.call(
                "pod_exchange", pb.PodExchangeRequest(ticket=self._ticket), None, resend=False
            )
        except Unreachable as exc:
            warn(f"warm pod: {exc}")
            return EXIT_UNREACHABLE
        except Refused as exc:
            warn(f"warm pod: the control plane refused the pod's ticket: {exc.details}")
            return EXIT_REFUSED
        self._ticket = ""
        self._token = got.pod_token
        if got.idle_timeout_seconds > 0:
            self.idle_timeout = got.idle_timeout_seconds
        if got.max_tasks > 0:
            self.max_tasks = got.max_tasks
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        while not self.retired and self.sup.received_signal is None:
            self._asking = asyncio.create_task(self._next())
            try:
                ticket = await self._asking
            except asyncio.CancelledError:
                if self.sup.received_signal is None:
                    raise
                break  # stopped (the pod is deleted) while idle: nothing to finish
            if ticket is None:
                break
            if ticket:
                await self._one(ticket)
        warn(f"warm pod: retiring after {self.done} task(s): {self.retired or 'stopped'}")
        return 0

    def _on_signal(self, signum: int) -> None:
        """Forwarded to a running task as always; an idle pod stops waiting for work."""
        self.sup.forward_signal(signum)
        if self._asking is not None and not self._asking.done():
            self._asking.cancel()

    async def _next(self) -> str | None:
        """The next task's ticket, "" for none yet, None when the pod is to retire."""
        request = pb.NextTaskRequest(done=self.done, wait_seconds=self.idle_timeout)
        started = time.monotonic()
        while True:
            try:
                reply = await self.sup.channel.call("next_task", request, self._token, resend=False)
                break
            except Unreachable as exc:
                if time.monotonic() - started > self.sup.channel.connect_timeout:
                    self.retired = f"the control plane is unreachable: {exc}"
                    return None
            except Refused as exc:
                if exc.code is not grpc.StatusCode.FAILED_PRECONDITION:
                    self.retired = f"refused: {exc.details}"
                    return None
                if time.monotonic() - started > self.sup.channel.connect_timeout:
                    self.retired = f"no leader reached: {exc.details}"
                    return None
                await self._redial()
        self._token = reply.pod_token or self._token
        if reply.retire:
            self.retired = reply.reason or "asked to retire"
            return None
        return str(reply.ticket)

    async def _redial(self) -> None:
        """A new connection (through the Service: maybe another replica, the leader)."""
        await asyncio.sleep(_REDIAL_BACKOFF)
        old = self.sup.channel
        self.sup.channel = self._dial()
        await self.sup.heartbeats.close()
        self.sup.heartbeats = Heartbeats(self.sup.channel)
        await old.close()

    async def _one(self, ticket: str) -> None:
        self.done += 1
        self.sup.pod_task = self.done
        run = TaskRun(self.sup, ticket, key=str(self.done))
        try:
            await run.run()
        except Exception as exc:  # the agent's bug: this pod is not to be trusted further
            warn(f"warm pod: task {self.done}: agent error: {exc!r}")
            self.retired = f"agent error: {type(exc).__name__}"
        if run.pid is not None and not await kill_group(run.pid):
            self.retired = f"a process of task {self.done} could not be killed or reaped"
        if run.oom_killed:
            self.retired = "its task was killed for lack of memory (OOM)"
        elif run.timed_out:
            self.retired = "its task was killed on timeout"
        if problem := self._clean():
            self.retired = f"the emptyDir could not be emptied: {problem}"
        if not self.retired and self.done >= self.max_tasks:
            self.retired = f"it ran max_tasks_per_pod ({self.max_tasks})"

    def _clean(self) -> str:
        return empty_dir(self.empty, self.scratch) if self.empty else ""
