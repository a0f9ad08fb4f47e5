"""One task, start to finish: Exchange, Start, secrets, the child process, logs,
heartbeats, timeout, cancellation, OOM sampling, Complete.

The same code runs a pod's only task and each of a warm pool agent's tasks; what is
per process (the channel, the heartbeat loop, signal forwarding, the OOM counter)
lives in ``Supervisor``; the end's message and its Complete in ``completion``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

from leoflow.agent import cgroup, nonblocking_spawn
from leoflow.agent.child import ChildProtocol, drain_pipes
from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.completion import end_message, killed_by_oom, report
from leoflow.agent.environment import task_environment
from leoflow.agent.lifeline import lifeline
from leoflow.agent.logship import LogShipper
from leoflow.agent.masking import Secrets
from leoflow.agent.outcome import (
    EXIT_CANNOT_EXECUTE,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_SETUP_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    own_program,
    reason_path,
    secret_env_name,
    signal_name,
    spawn_failure,
    warn,
)
from leoflow.agent.outputs import TaskFiles
from leoflow.agent.secret_values import resolve_secrets
from leoflow.agent.supervisor import Heartbeats, Supervisor
from leoflow.agent.task_uids import own_files
from leoflow.agent.warden import Warden
from leoflow.protocol.agent_v1 import pb

__all__ = [
    "EXIT_CANNOT_EXECUTE",
    "EXIT_NOT_FOUND",
    "EXIT_REFUSED",
    "EXIT_SETUP_FAILED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "Heartbeats",
    "Supervisor",
    "TaskRun",
    "secret_env_name",
    "warn",
]


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
        self.oom_killed = False
        self.forwarded: int | None = None
        self._sent_kill = False
        self._child_reaped = False
        self._warden: Warden | None = None  # lists our group while the command lives
        self._kill_timer: asyncio.TimerHandle | None = None
        self._escalate = False
        self.reason_path = ""
        self.files: TaskFiles | None = None
        self.secrets = Secrets(())  # what never leaves the agent unmasked, once resolved
        self.uid: int | None = None  # its own, from LEOFLOW_TASK_UIDS
        # The command and its PATH, to name a shell string's missing program (exit 127).
        self.command: tuple[Sequence[str], str | None] = ((), None)

    # -- control from outside (heartbeat loop, signals, the pool's stdin) ---------------

    def cancel(self, reason: str) -> None:
        if self.cancel_reason is None and not self.timed_out:
            self.cancel_reason = reason
            warn(f"{self.label}: cancelling: {reason}")
            self._terminate()

    def forward(self, signum: int, *, escalate: bool = False) -> None:
        """Pass a signal the agent received on to the command. ``escalate``: nobody
        else will kill a command that ignores it (the agent's parent is gone), so
        SIGKILL follows after the grace, as for a cancel."""
        self.forwarded = signum
        self._escalate = self._escalate or escalate
        if escalate:
            self._terminate()
        else:
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
        channel = self.sup.channel
        request = pb.StartRequest(
            pod_name=self.sup.pod_name,
            pod_uid=self.sup.pod_uid,
            hostname=self.sup.hostname,
            pid=os.getpid(),
            pod_task=self.sup.pod_task,
        )
        try:
            # Asks to start in the same reply; an endpoint that did not sends no ``start``.
            exchanged = await channel.call(
                "exchange",
                pb.ExchangeRequest(ticket=self._ticket, start=request),
                None,
                resend=False,
            )
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
        try:
            if exchanged.HasField("start"):
                spec = exchanged.start
            else:
                spec = await channel.call("start", request, self.token)
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
            await self._release_uid()
            if self.files is not None:
                self.files.remove(later=True)

    async def _run_command(self, spec: Any) -> int:
        secrets, unresolved = await resolve_secrets(self.sup.channel, self.token, spec.secret_names)
        if unresolved:
            return await self._fail_before_start(EXIT_SETUP_FAILED, unresolved)
        if secrets:
            # Off the loop: a long value's forms take ~0.1 s to compile, and the loop
            # ships the other tries' logs and heartbeats meanwhile.
            self.secrets = await asyncio.to_thread(Secrets.of, tuple(secrets.values()))
        env = task_environment(self.sup.base_env, spec.env, secrets)
        user = self.sup.task_user
        if (uids := self.sup.task_uids) is not None:
            if (uid := await uids.take()) is None:
                return await self._fail_before_start(EXIT_SETUP_FAILED, uids.exhausted())
            self.uid, user = uid, uids.user(uid)
        if spec.output_limit_bytes > 0 or spec.inputs or self.uid is not None:
            self.files = TaskFiles(spec.inputs, spec.output_limit_bytes, user)
            try:
                env.update(self.files.prepare())
            except OSError as exc:
                return await self._fail_before_start(
                    EXIT_SETUP_FAILED, f"the task's input/output directory could not be made: {exc}"
                )
        if not spec.argv:
            return await self._fail_before_start(EXIT_SETUP_FAILED, "the task has no command")
        stopped = self.cancel_reason or (
            self.forwarded is not None and f"the agent received {signal_name(self.forwarded)}"
        )
        if stopped:
            return await self._fail_before_start(
                128 + (self.forwarded or signal.SIGTERM), f"{stopped} before the command started"
            )

        loop = asyncio.get_running_loop()
        shipper = LogShipper(self.sup.channel, lambda: self.token, self.label, self.secrets)
        as_user: dict[str, Any] = {}
        if user is not None:
            as_user = {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}
        # A command may say why it failed in a line of its own (the dbt wrapper does).
        self.reason_path = env["LEOFLOW_EXIT_REASON_FILE"] = reason_path()
        if user is not None and self.uid is not None and self.files is not None:
            # All its own, in its own directory.
            self.reason_path = env["LEOFLOW_EXIT_REASON_FILE"] = own_files(
                env, self.files.root, user
            )
            as_user["umask"] = 0o077
        self.command = (tuple(spec.argv), env.get("PATH"))
        oom_before = self.sup.sample_oom(self)
        warden = self.sup.warden
        argv, hook = lifeline(
            own_program(list(spec.argv)),
            env,
            cwd=spec.cwd or None,
            switches_user=bool(as_user),
            warden=warden,
        )
        try:
            started: tuple[asyncio.SubprocessTransport, ChildProtocol] | None = None
            if hook is None and not as_user:  # off the loop where it can (nonblocking_spawn)
                started = await nonblocking_spawn.spawn(
                    lambda: ChildProtocol(shipper),
                    argv,
                    env,
                    spec.cwd or None,
                    on_loop=len(self.sup.runs) <= 1,  # ours alone
                )
            if started is None:
                started = await loop.subprocess_exec(
                    lambda: ChildProtocol(shipper),
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    cwd=spec.cwd or None,
                    process_group=0,
                    preexec_fn=hook,
                    **as_user,
                )
            transport, proto = started
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.sup.close_oom_window(self)
            return await self._fail_before_start(*spawn_failure(exc, spec.argv[0], spec.cwd, user))
        self.pid = transport.get_pid()
        cgroup.prefer_as_oom_victim(self.pid)
        if warden is not None and hook is None and warden.alive:
            warden.watch(self.pid)
            self._warden = warden
        try:
            return await self._follow(transport, proto, shipper, spec.timeout_seconds, oom_before)
        finally:
            self._unwatch()

    def _unwatch(self) -> None:
        """Strike our group off the warden's list: once reaped and drained it is gone."""
        if self._warden is not None and self.pid is not None:
            self._warden.forget(self.pid)
        self._warden = None

    async def _follow(
        self,
        transport: asyncio.SubprocessTransport,
        proto: ChildProtocol,
        shipper: LogShipper,
        time_limit: float,
        oom_before: int | None,
    ) -> int:
        """From the command's start to its reported end: logs, timeout, signals, exit."""
        loop = asyncio.get_running_loop()
        shipper.on_pressure(proto.pause)
        self.sup.event(event="started", key=self.key, pid=self.pid)
        ship = asyncio.create_task(shipper.run())
        timeout_timer = None
        if time_limit > 0:
            timeout_timer = loop.call_later(time_limit, self._on_timeout)
        if self.forwarded is not None:  # a signal that came while we were spawning
            if self._escalate:
                self._terminate()
            else:
                self._signal(self.forwarded)
        if self.cancel_reason is not None:
            self._terminate()
        try:
            returncode = await proto.exited
        finally:
            self._child_reaped = True
            if timeout_timer is not None:
                timeout_timer.cancel()
        await drain_pipes(proto, self.pid)
        self._unwatch()
        transport.close()
        oom_after = self.sup.close_oom_window(self)
        shipper.finish()
        await ship
        return await self._complete(returncode, time_limit, oom_before, oom_after)

    async def _complete(
        self, returncode: int, time_limit: float, oom_before: int | None, oom_after: int | None
    ) -> int:
        signum = -returncode if returncode < 0 else 0
        exit_code = 128 + signum if signum else returncode
        self.oom_killed = oom = killed_by_oom(
            oom_before,
            oom_after,
            exit_code,
            signum,
            overlapped=self.overlapped,
            sent_kill=self._sent_kill,
        )
        message = end_message(self, exit_code, signum, time_limit, oom)
        await self._release_uid()  # nothing of the try runs once its end is told
        output, output_error = None, ""
        ended_well = not (oom or self.timed_out or self.cancel_reason or exit_code)
        if ended_well and self.files is not None:
            output, output_error = self.files.take_output()
            if output_error:
                message = output_error
                warn(f"{self.label}: {output_error}")
        await report(
            self,
            exit_code,
            message,
            oom_killed=oom,
            signum=signum,
            output=output,
            output_error=output_error,
        )
        return exit_code

    async def _release_uid(self) -> None:
        uid, self.uid = self.uid, None
        if uid is not None and self.sup.task_uids is not None:
            await self.sup.task_uids.release(uid)

    async def _fail_before_start(self, exit_code: int, message: str) -> int:
        warn(f"{self.label}: {self.secrets.text(message)}")
        await report(self, exit_code, message, not_started=True)
        return exit_code
