"""What the tasks of one agent process share: the channel, one heartbeat loop for all
of them, signal forwarding and the OOM counter's window."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from leoflow.agent.cgroup import OomCounter
from leoflow.agent.channel import Channel
from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.environment import TaskUser
from leoflow.agent.outcome import warn
from leoflow.agent.task_uids import TaskUids
from leoflow.agent.warden import Warden
from leoflow.aio.waits import wait_set
from leoflow.protocol.agent_v1 import pb

if TYPE_CHECKING:
    from leoflow.agent.task import TaskRun


class Supervisor:
    """What the tasks of one agent process share."""

    def __init__(
        self,
        channel: Channel,
        *,
        oom: OomCounter,
        kill_grace: float,
        pod_name: str = "",
        pod_uid: str = "",
        on_event: Callable[[dict[str, Any]], None] | None = None,
        base_env: Mapping[str, str] | None = None,
        task_user: TaskUser | None = None,
        task_uids: TaskUids | None = None,
    ) -> None:
        self.channel = channel
        # What every command starts from (see ``environment``); never our own environment.
        self.base_env = dict(base_env or {})
        self.task_user = task_user
        self.task_uids = task_uids  # one uid per try instead (``task_uids``)
        self.oom = oom
        self.kill_grace = kill_grace
        self.pod_name = pod_name
        self.pod_uid = pod_uid
        self.pod_task = 0  # in a warm pod: the nth task it runs now (``warm``)
        self.hostname = socket.gethostname()
        self.on_event = on_event
        self.heartbeats = Heartbeats(channel)
        self.runs: set[TaskRun] = set()
        self.received_signal: int | None = None
        # The pool agent's parent (Lite), when it asked to die with it.
        self.parent_pid: int | None = None
        self.orphaned = False  # that parent died while we ran
        # Kills the commands' process groups if we die (pool mode; see ``warden``).
        self.warden: Warden | None = None
        self._oom_window: set[TaskRun] = set()
        self._oom_absence_said = False

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.forward_signal, signum)

    def forward_signal(self, signum: int) -> None:
        self.received_signal = signum
        # Lite's pool agent hears SIGTERM when its parent died (PDEATHSIG): no one
        # is left to SIGKILL a command that ignores it, so the agent does. In a pod
        # the kubelet does that itself after the pod's grace period.
        orphaned = self.parent_pid is not None and os.getppid() != self.parent_pid
        if orphaned:
            # Its endpoint died with it: the tries' ends cannot be told to anyone, and
            # Lite's next start finds them lost and runs them again.
            self.orphaned = True
            self.channel.abandon(
                f"the Lite process that started this agent (pid {self.parent_pid}) is gone"
            )
        for run in list(self.runs):
            run.forward(signum, escalate=orphaned)

    def sample_oom(self, run: TaskRun) -> int | None:
        """The counter as the OOM window of ``run`` opens."""
        if self._oom_window:
            run.overlapped = True
            for other in self._oom_window:
                other.overlapped = True
        self._oom_window.add(run)
        value = self.oom.read()
        if value is None and not self._oom_absence_said:
            self._oom_absence_said = True
            warn(self.oom.describe_absence())
        return value

    def close_oom_window(self, run: TaskRun) -> int | None:
        self._oom_window.discard(run)
        return self.oom.read()

    def event(self, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(fields)


class Heartbeats:
    """One timer loop for every running task of the process (no thread per task)."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._due: dict[TaskRun, float] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    def add(self, run: TaskRun) -> None:
        loop = asyncio.get_running_loop()
        self._due[run] = loop.time() + run.heartbeat_interval
        self._wake.set()
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.create_task(self._loop())

    def remove(self, run: TaskRun) -> None:
        self._due.pop(run, None)

    async def close(self) -> None:
        tasks = [t for t in (self._loop_task, *self._in_flight) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._due:
            now = loop.time()
            next_due = float("inf")
            for run, due in list(self._due.items()):
                if due <= now:
                    if not run.heartbeat_in_flight:
                        run.heartbeat_in_flight = True
                        task = asyncio.create_task(self._beat(run))
                        self._in_flight.add(task)
                        task.add_done_callback(self._in_flight.discard)
                    due = self._due[run] = now + run.heartbeat_interval
                next_due = min(next_due, due)
            self._wake.clear()
            await wait_set(self._wake, max(0.0, next_due - now))

    async def _beat(self, run: TaskRun) -> None:
        try:
            async with asyncio.timeout(max(5.0, 2 * run.heartbeat_interval)):
                response = await self._channel.call("heartbeat", pb.HeartbeatRequest(), run.token)
        except Refused as exc:
            if exc.code.name in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
                run.cancel(f"the control plane refused the heartbeat: {exc.details}")
            else:
                self._failing(run, f"{exc.code.name}: {exc.details}")
        except (Unreachable, TimeoutError) as exc:
            self._failing(run, str(exc) or "no answer in time")
        else:
            run.heartbeat_failing = False
            if response.session_token:
                run.token = response.session_token
            if response.cancel_requested:
                run.cancel(response.reason or "cancellation requested")
        finally:
            run.heartbeat_in_flight = False

    @staticmethod
    def _failing(run: TaskRun, why: str) -> None:
        if not run.heartbeat_failing:
            run.heartbeat_failing = True
            warn(f"{run.label}: heartbeat failed ({why}); retrying")
