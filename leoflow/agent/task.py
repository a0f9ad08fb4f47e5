"""One task, start to finish: Exchange, Start, secrets, the child process, logs,
heartbeats, timeout, cancellation, OOM sampling, Complete.

The same code runs a pod's only task and each of a warm pool agent's tasks; what is
per process (the channel, the heartbeat loop, signal forwarding, the OOM counter)
lives in ``Supervisor``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from leoflow.agent.cgroup import OomCounter
from leoflow.agent.client import Client, Refused, Unreachable
from leoflow.agent.environment import TaskUser, task_environment
from leoflow.agent.lifeline import parent_death_hook
from leoflow.agent.logship import LogShipper
from leoflow.protocol.agent_v1 import pb

OOM_MESSAGE = (
    "out of memory: the kernel killed this task's process. Raise the task's memory limit "
    "(resources.limits.memory); if it uses an engine with its own memory budget, such as "
    "DuckDB, set that budget too, because it sizes itself from detected RAM and may not "
    "see the container's limit."
)

EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4
EXIT_SETUP_FAILED = 5
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# After the command exits, how long its pipes may stay open (held by a process it
# left behind) before the rest of its process group is killed.
_PIPE_LINGER = 1.0
_PIPE_DRAIN_CAP = 10.0
REASON_LIMIT = 1000
_REASONS = itertools.count(1)


def secret_env_name(name: str) -> str:
    """``LEOFLOW_SECRET_<NAME>``: ASCII letters upper-cased, digits kept, anything else ``_``."""
    return "LEOFLOW_SECRET_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else "_" for c in name
    )


def own_program(argv: list[str]) -> list[str]:
    """A command whose program is ``leoflow`` runs this agent's own Leoflow.

    Never a ``leoflow`` that the task's PATH finds first: whatever a DAG image
    installs (a dbt with another protobuf, say) cannot stand in for it.
    """
    if argv and argv[0] == "leoflow":
        return [sys.executable, "-m", "leoflow", *argv[1:]]
    return argv


def _reason_path() -> str:
    # TMPDIR, else /tmp: the one writable path under a read-only root filesystem.
    base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"leoflow-exit-reason-{os.getpid()}-{next(_REASONS)}")


def _take_reason(path: str) -> str:
    """What the command wrote to ``LEOFLOW_EXIT_REASON_FILE``, first line, at most 1000 chars."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(REASON_LIMIT + 1)
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    text = " ".join(text.split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


def format_duration(seconds: float) -> str:
    """30m, 1h5m, 90s -> 1m30s, 1.5s: how a person writes a timeout."""
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Supervisor:
    """What the tasks of one agent process share."""

    def __init__(
        self,
        client: Client,
        *,
        oom: OomCounter,
        kill_grace: float,
        pod_name: str = "",
        pod_uid: str = "",
        on_event: Callable[[dict[str, Any]], None] | None = None,
        base_env: Mapping[str, str] | None = None,
        task_user: TaskUser | None = None,
    ) -> None:
        self.client = client
        # What every command starts from (see ``environment``); never our own environment.
        self.base_env = dict(base_env or {})
        self.task_user = task_user
        self.oom = oom
        self.kill_grace = kill_grace
        self.pod_name = pod_name
        self.pod_uid = pod_uid
        self.hostname = socket.gethostname()
        self.on_event = on_event
        self.heartbeats = Heartbeats(client)
        self.runs: set[TaskRun] = set()
        self.received_signal: int | None = None
        self._oom_window: set[TaskRun] = set()
        self._oom_absence_said = False

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.forward_signal, signum)

    def forward_signal(self, signum: int) -> None:
        self.received_signal = signum
        for run in list(self.runs):
            run.forward(signum)

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

    def __init__(self, client: Client) -> None:
        self._client = client
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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, next_due - now))

    async def _beat(self, run: TaskRun) -> None:
        import grpc

        try:
            response = await self._client.heartbeat(
                run.token, rpc_timeout=max(5.0, 2 * run.heartbeat_interval)
            )
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
                run.cancel(f"the control plane refused the heartbeat: {exc.details()}")
            elif not run.heartbeat_failing:
                run.heartbeat_failing = True
                warn(f"{run.label}: heartbeat failed ({code.name}: {exc.details()}); retrying")
        else:
            run.heartbeat_failing = False
            if response.session_token:
                run.token = response.session_token
            if response.cancel_requested:
                run.cancel(response.reason or "cancellation requested")
        finally:
            run.heartbeat_in_flight = False


class _ChildProtocol(asyncio.SubprocessProtocol):
    def __init__(self, shipper: LogShipper) -> None:
        loop = asyncio.get_running_loop()
        self.shipper = shipper
        self.exited: asyncio.Future[int] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        assert isinstance(data, bytes)
        self.shipper.feed(pb.LogChunk.STDOUT if fd == 1 else pb.LogChunk.STDERR, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if self.transport is not None and not self.exited.done():
            code = self.transport.get_returncode()
            self.exited.set_result(code if code is not None else -1)

    def pause(self, paused: bool) -> None:
        if self.transport is None:
            return
        for fd in (1, 2):
            pipe = self.transport.get_pipe_transport(fd)
            if pipe is not None and not pipe.is_closing():
                if paused:
                    pipe.pause_reading()  # type: ignore[attr-defined]
                else:
                    pipe.resume_reading()  # type: ignore[attr-defined]


class TaskRun:
    def __init__(self, sup: Supervisor, ticket: str, *, key: str = "") -> None:
        self.sup = sup
        self.key = key
        self._ticket = ticket
        self.label = f"task {key}" if key else "task"
        self.token = ""
        self.heartbeat_interval = 5.0
        self.heartbeat_in_flight = False
        self.heartbeat_failing = False
        self.overlapped = False
        self.pid: int | None = None
        self.cancel_reason: str | None = None
        self.timed_out = False
        self.forwarded: int | None = None
        self._sent_kill = False
        self._child_reaped = False
        self._kill_timer: asyncio.TimerHandle | None = None
        self.reason_path = ""

    # -- control from outside (heartbeat loop, signals, the pool's stdin) ---------------

    def cancel(self, reason: str) -> None:
        if self.cancel_reason is None and not self.timed_out:
            self.cancel_reason = reason
            warn(f"{self.label}: cancelling: {reason}")
            self._terminate()

    def forward(self, signum: int) -> None:
        self.forwarded = signum
        self._signal(signum)

    def _on_timeout(self) -> None:
        if self.cancel_reason is None and not self._child_reaped:
            self.timed_out = True
            self._terminate()

    def _terminate(self) -> None:
        """SIGTERM to the command's process group now, SIGKILL after the grace."""
        if self.pid is None or self._child_reaped:
            return
        self._signal(signal.SIGTERM)
        if self._kill_timer is None:
            loop = asyncio.get_running_loop()
            self._kill_timer = loop.call_later(self.sup.kill_grace, self._kill)

    def _kill(self) -> None:
        if not self._child_reaped:
            self._sent_kill = True
            self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        # Only while the command is unreaped: its pid is then still its group's id.
        if self.pid is not None and not self._child_reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)

    # -- the run -------------------------------------------------------------------------

    async def run(self) -> int:
        """The task, start to finish; returns the exit code for the agent."""
        client = self.sup.client
        try:
            exchanged = await client.call("Exchange", pb.ExchangeRequest(ticket=self._ticket), None)
        except Unreachable as exc:
            warn(f"{self.label}: {exc}")
            return EXIT_UNREACHABLE
        except Refused as exc:
            warn(
                f"{self.label}: the control plane refused the ticket: "
                f"{exc.code.name}: {exc.details}"
            )
            return EXIT_REFUSED
        self._ticket = ""
        self.token = exchanged.session_token
        self.label = (
            f"{exchanged.dag_id}/{exchanged.run_id}/{exchanged.task_id} try {exchanged.try_number}"
        )
        if exchanged.heartbeat_interval_seconds > 0:
            self.heartbeat_interval = exchanged.heartbeat_interval_seconds
        request = pb.StartRequest(
            pod_name=self.sup.pod_name,
            pod_uid=self.sup.pod_uid,
            hostname=self.sup.hostname,
            pid=os.getpid(),
        )
        try:
            spec = await client.call("Start", request, self.token)
        except (Unreachable, Refused) as exc:
            warn(f"{self.label}: Start failed: {exc}")
            return EXIT_UNREACHABLE if isinstance(exc, Unreachable) else EXIT_REFUSED
        self.sup.runs.add(self)
        self.sup.heartbeats.add(self)
        try:
            return await self._run_command(spec)
        except Exception as exc:
            if self.pid is not None:
                raise
            # Whatever went wrong before the command ran is this try's outcome, now,
            # not a silence the control plane can only read as a lost agent.
            return await self._fail_before_start(
                EXIT_SETUP_FAILED,
                f"the agent failed before starting the command: {type(exc).__name__}: {exc}",
            )
        finally:
            self.sup.heartbeats.remove(self)
            self.sup.runs.discard(self)
            if self._kill_timer is not None:
                self._kill_timer.cancel()

    async def _run_command(self, spec: Any) -> int:
        secrets: dict[str, str] = {}
        for name in spec.secret_names:
            try:
                resolved = await self.sup.client.call(
                    "ResolveSecret", pb.ResolveSecretRequest(name=name), self.token
                )
            except (Refused, Unreachable) as exc:
                why = exc.details if isinstance(exc, Refused) else str(exc)
                return await self._fail_before_start(
                    EXIT_SETUP_FAILED, f"secret {name!r} could not be resolved: {why}"
                )
            secrets[secret_env_name(name)] = resolved.value
        env = task_environment(self.sup.base_env, spec.env, secrets)
        if not spec.argv:
            return await self._fail_before_start(EXIT_SETUP_FAILED, "the task has no command")
        stopped = self.cancel_reason or (
            self.forwarded is not None and f"the agent received {_signal_name(self.forwarded)}"
        )
        if stopped:
            return await self._fail_before_start(
                128 + (self.forwarded or signal.SIGTERM), f"{stopped} before the command started"
            )

        loop = asyncio.get_running_loop()
        shipper = LogShipper(self.sup.client, lambda: self.token, self.label, secrets.values())
        user = self.sup.task_user
        as_user: dict[str, Any] = {}
        if user is not None:
            as_user = {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}
        # A command may say why it failed in a line of its own (the dbt wrapper does).
        self.reason_path = env["LEOFLOW_EXIT_REASON_FILE"] = _reason_path()
        oom_before = self.sup.sample_oom(self)
        try:
            transport, proto = await loop.subprocess_exec(
                lambda: _ChildProtocol(shipper),
                *own_program(list(spec.argv)),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=spec.cwd or None,
                process_group=0,
                preexec_fn=parent_death_hook(),
                **as_user,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.sup.close_oom_window(self)
            return await self._fail_before_start(*_spawn_failure(exc, spec.argv[0], spec.cwd, user))
        self.pid = transport.get_pid()
        shipper.on_pressure(proto.pause)
        self.sup.event(event="started", key=self.key, pid=self.pid)
        ship = asyncio.create_task(shipper.run())
        timeout_timer = None
        if spec.timeout_seconds > 0:
            timeout_timer = loop.call_later(spec.timeout_seconds, self._on_timeout)
        if self.forwarded is not None:  # a signal that came while we were spawning
            self._signal(self.forwarded)
        if self.cancel_reason is not None:
            self._terminate()
        try:
            returncode = await proto.exited
        finally:
            self._child_reaped = True
            if timeout_timer is not None:
                timeout_timer.cancel()
        await self._drain_pipes(proto)
        transport.close()
        oom_after = self.sup.close_oom_window(self)
        shipper.finish()
        await ship
        return await self._complete(returncode, spec.timeout_seconds, oom_before, oom_after)

    async def _drain_pipes(self, proto: _ChildProtocol) -> None:
        """Wait for EOF on stdout and stderr; kill what the command left holding them."""
        done, _ = await asyncio.wait([proto.pipes_closed], timeout=_PIPE_LINGER)
        if done or self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        await asyncio.wait([proto.pipes_closed], timeout=_PIPE_DRAIN_CAP)

    async def _complete(
        self, returncode: int, time_limit: float, oom_before: int | None, oom_after: int | None
    ) -> int:
        signum = -returncode if returncode < 0 else 0
        exit_code = 128 + signum if signum else returncode
        reason = _take_reason(self.reason_path) if self.reason_path else ""
        oom = False
        if oom_before is not None and oom_after is not None and oom_after > oom_before:
            # Alone in the cgroup, any rise is ours. Sharing it, the rise is ours when we
            # died of a SIGKILL we did not send ourselves.
            died_of_kill = signum == signal.SIGKILL or exit_code == 128 + signal.SIGKILL
            oom = not self.overlapped or (died_of_kill and not self._sent_kill)
        if oom:
            message = OOM_MESSAGE
        elif self.timed_out:
            message = f"timed out after {format_duration(time_limit)}"
        elif self.cancel_reason is not None:
            message = f"cancelled: {self.cancel_reason}"
        else:
            message = _exit_description(exit_code, signum)
            if reason and exit_code:
                message = f"{reason} ({message})"
            if self.forwarded is not None:
                message = (
                    f"the agent received {_signal_name(self.forwarded)} and forwarded it; "
                    + (message or "the command exited with code 0")
                )
        await self._report(exit_code, message, oom_killed=oom, signum=signum)
        return exit_code

    async def _fail_before_start(self, exit_code: int, message: str) -> int:
        warn(f"{self.label}: {message}")
        await self._report(exit_code, message, not_started=True)
        return exit_code

    async def _report(
        self,
        exit_code: int,
        message: str,
        *,
        oom_killed: bool = False,
        signum: int = 0,
        not_started: bool = False,
    ) -> None:
        request = pb.CompleteRequest(
            exit_code=exit_code,
            oom_killed=oom_killed,
            timed_out=self.timed_out,
            signal=signum,
            message=message,
            not_started=not_started,
        )
        try:
            await self.sup.client.call("Complete", request, self.token)
        except (Refused, Unreachable) as exc:
            # Signalled with the control plane (Lite stopping), a refusal is expected:
            # the control plane runs the try again and says so itself.
            if not (isinstance(exc, Refused) and self.sup.received_signal is not None):
                warn(
                    f"{self.label}: its completion (exit code {exit_code}) was not recorded: {exc}"
                )
        self.sup.event(event="finished", key=self.key, exit_code=exit_code, message=message)


def _spawn_failure(
    exc: Exception, program: str, cwd: str, user: TaskUser | None
) -> tuple[int, str]:
    """Exit code and sentence for a command that could not be started."""
    if isinstance(exc, ValueError):  # a NUL byte in the command or its environment
        return EXIT_SETUP_FAILED, f"cannot start {program!r}: {exc}"
    if isinstance(exc, subprocess.SubprocessError):
        return EXIT_SETUP_FAILED, f"cannot start {program!r}: {exc}"
    assert isinstance(exc, OSError)
    if isinstance(exc, FileNotFoundError) and cwd and not os.path.isdir(cwd):
        return EXIT_SETUP_FAILED, f"working directory {cwd!r} does not exist"
    if isinstance(exc, FileNotFoundError):
        return EXIT_NOT_FOUND, f"command not found: {program!r}"
    if user is not None and exc.errno == errno.EPERM:
        return EXIT_SETUP_FAILED, (
            f"cannot run {program!r} as task user {user.name!r} (uid {user.uid}): "
            f"{exc.strerror}; only an agent running as root can switch users"
        )
    if isinstance(exc, PermissionError):
        return EXIT_CANNOT_EXECUTE, f"cannot execute {program!r}: {exc.strerror}"
    return EXIT_CANNOT_EXECUTE, f"cannot start {program!r}: {exc}"


def _exit_description(exit_code: int, signum: int) -> str:
    if signum:
        return f"killed by signal {_signal_name(signum)}"
    return f"exited with code {exit_code}" if exit_code else ""


def warn(message: str) -> None:
    print(f"leoflow agent: {message}", file=sys.stderr, flush=True)
