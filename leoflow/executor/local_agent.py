"""Lite's executor: every task runs under one long-lived ``leoflow agent --pool``.

The agent dials the scheduler's gRPC endpoint exactly as a pod's agent does;
only how its ticket arrives differs (a line on the agent's stdin instead of a
pod spec). One warm agent for all tasks avoids paying ~80 ms of interpreter and
grpc start-up per task (ADR 0053's N:1 topology).

The agent's ``--events`` lines tell this executor when a try is over. If a try
ends without its Complete reaching the scheduler (the agent could not start it,
or died), the executor reports the outcome itself; the scheduler ignores a
second report for a try that is already finished.

The agent gets only what it needs: the documented task base environment, the
endpoint's address and its own ``LEOFLOW_AGENT_*`` knobs — never the signing key,
the database URL or any other setting of ours. If it dies (even of SIGKILL), every
command it was running dies too: the kernel SIGKILLs each one (parent-death
signal), and this executor kills what is left of each command's process group and
waits until none of it is alive before it reports the try lost. Such a try is
retried without spending one of the task's retries (reason ``agent_died``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from leoflow.agent import held_dirs
from leoflow.agent.environment import base_environment, resolve_task_user
from leoflow.aio import stages
from leoflow.domain.execution import Attempt, Launch, LaunchError, Report, TaskFinished
from leoflow.domain.reasons import EndReason
from leoflow.executor.process_groups import group_alive
from leoflow.executor.spawn import PipedChild, spawn_piped
from leoflow.settings import Settings

log = logging.getLogger("leoflow.executor.local_agent")

# On stop, how long the agent's commands have between SIGTERM and SIGKILL: Lite must
# be gone within 3 s of a SIGTERM, so a command gets a moment to clean up, no more.
STOP_GRACE = 1.5
# Passed on to the agent when set here; nothing else of our environment is.
_AGENT_PASSTHROUGH = (
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "LEOFLOW_AGENT_CONNECT_TIMEOUT",
    "LEOFLOW_AGENT_KILL_GRACE",
    "LEOFLOW_CGROUP_ROOT",
)
_GROUP_POLL = 0.05
_GROUP_WARN_AFTER = 10.0


class LocalAgentExecutor:
    name = "agent"
    uses_agent = True
    agents_dial_here = True  # its one agent is our child, dialing our endpoint

    def __init__(
        self, settings: Settings, *, agent_endpoint: str | None, endpoint_dir: str | None = None
    ) -> None:
        """``endpoint_dir``: the private directory of the endpoint's Unix socket, which
        the agent removes if it outlives this process (``leoflow run`` killed)."""
        self.settings = settings
        self.endpoint_dir = endpoint_dir
        if settings.task_user:
            resolve_task_user(settings.task_user)  # an unknown user stops Lite at start
            log.warning(
                "every task runs as %r: a task can read the environment (its secrets) "
                "and files of another running at the same time; LEOFLOW_TASK_UIDS gives "
                "each task its own uid instead",
                settings.task_user,
            )
        # Where the agent dials; None only when the endpoint could not be served.
        self.agent_endpoint = agent_endpoint
        self._report: Report | None = None
        self._process: PipedChild | None = None
        self._reader: asyncio.Task[None] | None = None
        self._inflight: dict[str, Launch] = {}
        self._pgids: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._outbox: list[bytes] = []  # lines not yet written to the agent
        self._writer: asyncio.Task[None] | None = None
        self._stopping = False
        self._partial = b""
        self.scratch = ""  # the running agent's scratch directory (see ``_ensure_agent``)

    async def warm(self) -> None:
        """Start the agent now, so its ~0.1 s of start-up overlaps ours."""
        await self._ensure_agent()

    async def start(self, report: Report) -> None:
        """The endpoint is serving by now: the agent may connect before its first task
        comes, so that task does not wait for the connection and HTTP/2's handshake."""
        self._report = report
        await self._ensure_agent()
        with contextlib.suppress(LaunchError):  # a dead agent: the first launch says so
            await self._send({"op": "dial"})

    async def _ensure_agent(self) -> PipedChild:
        if self._process is not None and self._process.returncode is None:
            return self._process
        if self.agent_endpoint is None:
            raise LaunchError("the agent endpoint is not serving")
        env = agent_environment(self.settings)
        env["LEOFLOW_AGENT_ENDPOINT"] = self.agent_endpoint
        env["LEOFLOW_AGENT_PARENT_PID"] = str(os.getpid())
        if self.endpoint_dir:
            env["LEOFLOW_AGENT_SOCKET_DIR"] = self.endpoint_dir
        if self.settings.agent_tls_ca_file is not None:
            env["LEOFLOW_AGENT_CA_FILE"] = str(self.settings.agent_tls_ca_file)
        # The endpoint is in this very process: if it stops answering for this
        # long, the scheduler is gone and retrying longer helps nobody.
        env.setdefault("LEOFLOW_AGENT_CONNECT_TIMEOUT", "10")
        self._partial = b""
        # A private directory for this agent's tries' directories (see
        # ``agent.outputs``), removed whole once the agent has ended, however it ended.
        scratch = self.scratch = env["LEOFLOW_SCRATCH_DIR"] = held_dirs.scratch_dir(
            "leoflow-agent-"
        )
        try:
            self._process = await spawn_piped(
                [sys.executable, "-m", "leoflow.agent", "--pool", "--events"],
                env,
                self._on_output,
            )
        except BaseException:
            held_dirs.remove(scratch)
            raise
        self._reader = asyncio.create_task(self._watch_agent(self._process, scratch))
        return self._process

    def _on_output(self, chunk: bytes) -> None:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                event: dict[str, Any] = json.loads(line)
            except ValueError:
                log.warning("unreadable line from the agent: %r", line[:200])
                continue
            self._on_event(event)

    async def _watch_agent(self, process: PipedChild, scratch: str) -> None:
        code = await process.wait()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await process.output_closed()
        if not self._stopping:
            log.error("the Lite agent exited unexpectedly with code %s", code)
        lost = list(self._inflight.items())
        pgids = {self._pgids.pop(key) for key, _ in lost if key in self._pgids}
        await self._kill_groups(pgids)
        # An agent that ended cleanly removed its tries' directories itself; one that
        # was killed could not, nor the directories it had made ahead.
        await asyncio.to_thread(held_dirs.remove, scratch)
        for key, launch in lost:
            if self._inflight.pop(key, None) is None:
                continue  # its end arrived meanwhile
            self._finish(
                launch,
                None,
                EndReason.AGENT_DIED,
                f"the local agent process exited with code {code} while this try ran; "
                "its processes were killed and it is retried without counting against "
                "the task's retries",
            )

    async def _kill_groups(self, pgids: set[int]) -> None:
        """SIGKILL each process group until none of its processes is alive."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        warned = False
        while pgids:
            for pgid in list(pgids):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                if not group_alive(pgid):
                    pgids.discard(pgid)
            if not pgids or self._stopping:
                return
            if not warned and loop.time() - started > _GROUP_WARN_AFTER:
                warned = True
                log.warning(
                    "process group(s) %s of a dead agent survive SIGKILL; their tries are "
                    "not retried until they are gone",
                    sorted(pgids),
                )
            await asyncio.sleep(_GROUP_POLL)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind, key = event.get("event"), event.get("key")
        if not isinstance(key, str):
            if kind == "error":
                log.warning("agent: %s", event.get("message"))
            return
        if kind == "started":
            pid = event.get("pid")
            if isinstance(pid, int) and (launch := self._inflight.get(key)) is not None:
                self._pgids[key] = pid  # the command leads its own process group
                stages.mark("spawned", launch.ti_pk, launch.try_number)
        elif kind == "finished":
            self._pgids.pop(key, None)
            launch = self._inflight.pop(key, None)
            if launch is not None:
                code = event.get("exit_code")
                reason = EndReason.SUCCESS if code == 0 else EndReason.EXIT_CODE
                self._finish(
                    launch,
                    code if isinstance(code, int) else None,
                    reason,
                    str(event.get("message", "")),
                )
        elif kind == "error":
            self._pgids.pop(key, None)
            launch = self._inflight.pop(key, None)
            if launch is not None:
                self._finish(
                    launch,
                    None,
                    EndReason.LAUNCH_FAILED,
                    f"the agent could not run it: {event.get('message')}",
                )

    def _finish(self, launch: Launch, code: int | None, reason: str, message: str) -> None:
        # A backstop: normally the agent's Complete RPC has finished this try already.
        if self._report is not None:
            self._report(
                TaskFinished(launch.ti_pk, launch.try_number, code, reason, message, time.time())
            )

    async def _send(self, message: dict[str, Any]) -> None:
        """Lines sent in one turn of the loop (a tick's launches) go to the agent in
        one write, so it wakes once for them all, not once a line; in order."""
        self._outbox.append(json.dumps(message).encode() + b"\n")
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_outbox())
        await asyncio.shield(self._writer)

    async def _write_outbox(self) -> None:
        async with self._lock:
            try:
                while self._outbox:
                    data = b"".join(self._outbox)
                    self._outbox.clear()
                    process = await self._ensure_agent()
                    await process.write(data)
            except (BrokenPipeError, ConnectionResetError, OSError) as exc:
                self._outbox.clear()  # their senders get the error: none goes later
                raise LaunchError(f"the local agent is gone: {exc}") from exc
            except BaseException:
                self._outbox.clear()
                raise

    async def launch(self, launch: Launch) -> None:
        if launch.ticket is None:
            raise LaunchError("no ticket for the agent")
        key = f"{launch.ti_pk}:{launch.try_number}"
        self._inflight[key] = launch
        try:
            await self._send({"op": "run", "key": key, "ticket": launch.ticket})
            stages.mark("sent", launch.ti_pk, launch.try_number)
        except BaseException:
            self._inflight.pop(key, None)
            raise

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        key = f"{ti_pk}:{try_number}"
        if key in self._inflight:
            with contextlib.suppress(LaunchError):
                await self._send({"op": "cancel", "key": key, "reason": reason})

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        # The previous scheduler's agent was its child and stopped with it.
        return set()

    async def stop(self) -> None:
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            await self._stop_agent(process)
        if self._reader is not None:  # it removes the agent's scratch directory
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    async def _stop_agent(self, process: PipedChild) -> None:
        # The agent forwards SIGTERM to every command's process group, refuses new
        # work and exits once its commands have ended (the scheduler, stopping,
        # refuses their Complete at once). A command still alive after the grace is
        # killed with its whole group, and so is the agent.
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        process.close_stdin()
        try:
            async with asyncio.timeout(STOP_GRACE):
                await process.wait()
        except TimeoutError:
            for pid in list(self._pgids.values()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            await process.wait()


def agent_environment(settings: Settings, source: dict[str, str] | None = None) -> dict[str, str]:
    """The pool agent's environment: the task base and the agent's own knobs, no more."""
    environ = dict(os.environ) if source is None else source
    env = base_environment(environ)
    env.update((name, environ[name]) for name in _AGENT_PASSTHROUGH if name in environ)
    env["GRPC_ENABLE_FORK_SUPPORT"] = "0"
    if settings.task_user:
        env["LEOFLOW_AGENT_TASK_USER"] = settings.task_user
    if settings.task_uids:
        env["LEOFLOW_AGENT_TASK_UIDS"] = settings.task_uids
    return env
