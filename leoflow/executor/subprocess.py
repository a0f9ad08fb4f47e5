"""Run each task as a local child process: Lite's direct executor.

Each child gets its own process group so that a timeout or a cancel kills
everything the command started, not only the shell in front of it, and so that
Lite's warden can kill that group when Lite dies (``leoflow.agent.warden``). Its
environment is built, not inherited (``leoflow.agent.environment``): the documented
base, the task's env, its context variables — never Lite's settings.
This executor does not resolve secrets (the agent does): a task's ``secrets`` are not
set here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from leoflow.agent import held_dirs
from leoflow.agent.environment import TaskUser, base_environment, resolve_task_user
from leoflow.agent.outcome import EXIT_NOT_FOUND, shell_not_found, spawn_failure
from leoflow.agent.outputs import TaskFiles
from leoflow.agent.scratch import SCRATCH
from leoflow.agent.warden import Warden
from leoflow.domain.durations import format_duration
from leoflow.domain.execution import (
    Attempt,
    Launch,
    LaunchError,
    LogData,
    Report,
    TaskFinished,
    TaskStarted,
    context_env,
)
from leoflow.domain.outputs import OUTPUT_LIMIT, settle_output
from leoflow.domain.reasons import EndReason
from leoflow.executor.spawn import Child, spawn

KILL_GRACE = 5.0
# Stopping, the grace is short: Lite must be gone within 3 s of a SIGTERM.
STOP_KILL_GRACE = 1.5
# How long a command's leftover background processes may hold its output open.
OUTPUT_GRACE = 1.0


def task_environment(launch: Launch, user: TaskUser | None = None) -> dict[str, str]:
    """The child's environment: the base, the task's, and where it sits in the DAG."""
    env = base_environment(os.environ, user)
    env.update(launch.spec.env)
    env.update(launch.env)
    env.update(context_env(launch.dag_id, launch.run_id, launch.task_id, launch.try_number))
    return env


def describe_exit(returncode: int) -> tuple[int, str]:
    """Exit code as a shell reports it (128+N for signal N) and a sentence."""
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return 128 + sig, f"killed by {name}"
    return returncode, f"exited with code {returncode}"


@dataclass
class _Child:
    launch: Launch
    process: Child
    files: TaskFiles
    supervisor: asyncio.Task[None] | None = None
    cancel_reason: str | None = None
    env_path: str | None = None  # the command's PATH, to name a shell's missing program


class SubprocessExecutor:
    name = "subprocess"
    uses_agent = False
    agents_dial_here = False

    def __init__(self, kill_grace: float = KILL_GRACE, task_user: str | None = None) -> None:
        self._user = resolve_task_user(task_user) if task_user else None
        self._report: Report | None = None
        self._kill_grace = kill_grace
        self._children: dict[tuple[int, int], _Child] = {}
        self._warden: Warden | None = None
        self._scratch = ""  # this executor's tries' files go here (see ``start``)

    async def warm(self) -> None:
        """Nothing to prepare: each task is its own child."""

    async def start(self, report: Report) -> None:
        self._report = report
        # Kills the children's groups if Lite dies (one process, not an exec a child).
        self._warden = Warden.start()
        # A private directory for the tries' files, so a kill -9 of Lite leaves one
        # directory that the next start removes (``held_dirs``), not one per try.
        if not self._scratch:
            self._scratch = held_dirs.scratch_dir("leoflow-lite-")

    async def launch(self, launch: Launch) -> None:
        if self._report is None:
            raise LaunchError("executor not started")
        report = self._report
        key = (launch.ti_pk, launch.try_number)

        def output(chunk: bytes) -> None:
            report(LogData(key[0], key[1], chunk))

        files = TaskFiles(launch.inputs, OUTPUT_LIMIT, self._user, base=self._scratch)
        try:
            argv, env = launch.spec.argv(), task_environment(launch, self._user)
            env.update(files.prepare())
            if argv[0] == "leoflow":  # Leoflow's own, as the agent runs it (leoflow dbt-task)
                argv = [sys.executable, "-m", "leoflow", *argv[1:]]
            process = await spawn(
                argv, env=env, on_output=output, user=self._user, warden=self._warden
            )
        except OSError as exc:
            files.remove(later=True)
            said = spawn_failure(exc, launch.spec.argv()[0], "", self._user)[1]
            raise LaunchError(said) from exc
        except (ValueError, subprocess.SubprocessError) as exc:  # a NUL byte, a failed setuid
            files.remove(later=True)
            raise LaunchError(f"cannot start {launch.spec.argv()[0]!r}: {exc}") from exc
        child = _Child(launch, process, files, env_path=env.get("PATH"))
        self._children[(launch.ti_pk, launch.try_number)] = child
        self._report(
            TaskStarted(launch.ti_pk, launch.try_number, f"pid:{process.pid}", time.time())
        )
        child.supervisor = asyncio.create_task(self._supervise(child))

    async def _supervise(self, child: _Child) -> None:
        assert self._report is not None
        report, launch, process = self._report, child.launch, child.process
        timed_out = False

        try:
            async with asyncio.timeout(launch.spec.timeout):
                await process.wait()
        except TimeoutError:
            timed_out = True
            await self._kill_group(process)
        finally:
            if process.returncode is None:  # cancelled: the executor is stopping
                await self._kill_group(process)
            try:
                async with asyncio.timeout(OUTPUT_GRACE):
                    await process.output_closed()
            except TimeoutError:
                # The command exited but left processes holding its output open.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5):
                        await process.output_closed()
            if self._warden is not None:
                self._warden.forget(process.pid)
            self._children.pop((launch.ti_pk, launch.try_number), None)
        assert process.returncode is not None
        code, said = describe_exit(process.returncode)
        if code == EXIT_NOT_FOUND:  # a shell string's missing program, as argv's says it
            said = shell_not_found(child.launch.spec.argv(), child.env_path) or said
        if timed_out:
            assert launch.spec.timeout is not None
            reason = EndReason.TIMEOUT
            message = (
                f"timed out after {format_duration(launch.spec.timeout)}; "
                "the task's process group was killed"
            )
        elif child.cancel_reason is not None:
            reason, message = EndReason.CANCELLED, f"cancelled: {child.cancel_reason}"
        elif process.returncode == 0:
            reason, message = EndReason.SUCCESS, said
        else:
            reason, message = EndReason.EXIT_CODE, said
        ok = reason == EndReason.SUCCESS
        output, output_error = child.files.take_output() if ok else (None, "")
        child.files.remove(later=True)
        ended = settle_output(reason, message, output, output_error)
        at = time.time()
        report(
            TaskFinished(launch.ti_pk, launch.try_number, code, ended[0], ended[1], at, ended[2])
        )

    async def _kill_group(self, process: Child) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                async with asyncio.timeout(self._kill_grace):
                    await process.wait()
                return
            except TimeoutError:
                continue

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        child = self._children.get((ti_pk, try_number))
        if child is not None and child.cancel_reason is None:
            child.cancel_reason = reason
            # The supervisor sees the process end and reports the cancellation.
            await self._kill_group(child.process)

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        # Children die with the process group of the scheduler that started them.
        return set()

    async def stop(self) -> None:
        self._kill_grace = min(self._kill_grace, STOP_KILL_GRACE)
        supervisors = [c.supervisor for c in self._children.values() if c.supervisor]
        for task in supervisors:
            task.cancel()
        for task in supervisors:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._warden is not None:
            self._warden.close()
            self._warden = None
        if self._scratch:
            scratch, self._scratch = self._scratch, ""
            SCRATCH.forget(scratch)
            await asyncio.to_thread(held_dirs.remove, scratch)
