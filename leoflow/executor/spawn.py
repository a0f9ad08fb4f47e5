"""Start child processes cheaply, and follow them without the event loop's fd machinery.

Each task runs in its own session, so a timeout or cancel can kill its whole
process group. Both obvious ways to start such a child are slow in a process
this size: uvloop spawns with fork() (~5 ms a child here), and CPython 3.11's
subprocess gives up vfork() as soon as ``start_new_session`` is set (~2.6 ms).
``os.posix_spawn`` with ``setsid`` keeps glibc's vfork-style clone (~0.9 ms).
A task's command must die with us: with a live ``Warden`` (``leoflow.agent.warden``)
that costs nothing per child, so ``spawn`` uses posix_spawn. Without one, or with a
task user (setuid/setgid/setgroups, which posix_spawn cannot do), it goes through
subprocess and ``lifeline``: setpriv in front, or a real fork() and a Python hook in
the child (on a loaded 2-core machine ~15 ms instead of ~4 ms a child).
``spawn_piped`` (our own helper processes, which die with us on their own) keeps
posix_spawn.

Two threads per running child, one reading its output to the end and one
reaping it, hand both to the loop with ``call_soon_threadsafe``. Registering the pipes and
pidfds with uvloop instead went wrong twice: a pidfd that reused a closing
pipe's number never reported readiness (children stayed zombies, runs hung),
and a pipe closed both by libuv and by its Python file object aborted the
process. A command that leaves a background process holding its output open
has exited all the same: the exit and the end of the output are separate.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from leoflow.agent.environment import TaskUser
from leoflow.agent.lifeline import lifeline
from leoflow.agent.warden import Warden

_READ = 64 * 1024

Output = Callable[[bytes], None]


def _exit_code(status: int) -> int:
    """Like Popen.returncode: the exit status, or minus the signal that killed it."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Child:
    """A running child: its output goes to ``on_output`` (on the loop), its exit to ``wait()``."""

    def __init__(
        self,
        pid: int,
        output_fd: int | None,
        on_output: Output | None,
        wait: Callable[[], int] | None = None,
    ) -> None:
        self.pid = pid
        self._wait = wait
        loop = asyncio.get_running_loop()
        self._exit: asyncio.Future[int] = loop.create_future()
        self._output_done: asyncio.Future[None] = loop.create_future()
        threading.Thread(
            target=self._reap, args=(loop,), name=f"leoflow-reap-{pid}", daemon=True
        ).start()
        if output_fd is None:
            self._output_done.set_result(None)
        else:
            threading.Thread(
                target=self._read,
                args=(loop, output_fd, on_output),
                name=f"leoflow-read-{pid}",
                daemon=True,
            ).start()

    def _reap(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._wait is not None:
            code = self._wait()
        else:
            _, status = os.waitpid(self.pid, 0)
            code = _exit_code(status)
        with contextlib.suppress(RuntimeError):  # the loop may be closing
            loop.call_soon_threadsafe(self._settle, code)

    def _read(self, loop: asyncio.AbstractEventLoop, fd: int, on_output: Output | None) -> None:
        try:
            while chunk := os.read(fd, _READ):
                if on_output is not None:
                    loop.call_soon_threadsafe(on_output, chunk)
        finally:
            os.close(fd)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._settle_output)

    def _settle_output(self) -> None:
        if not self._output_done.done():
            self._output_done.set_result(None)

    def _settle(self, code: int) -> None:
        if not self._exit.done():
            self._exit.set_result(code)

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    async def output_closed(self) -> None:
        """Until the child's output reached EOF (every chunk has been handed over)."""
        await asyncio.shield(self._output_done)


def _resolve(executable: str, env: Mapping[str, str]) -> str:
    if os.sep in executable:
        return executable
    found = shutil.which(executable, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(2, "command not found in PATH", executable)
    return found


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    on_output: Output | None = None,
    user: TaskUser | None = None,
    warden: Warden | None = None,
) -> Child:
    """Start ``argv`` in a new session; its stdout+stderr go to ``on_output``.

    The child's group is killed when this process dies: by ``warden`` if it is alive
    (the caller strikes the group off once it ended), else the child alone gets
    SIGKILL (``lifeline``). With ``user`` it runs as that user, with its groups.
    """
    executable = _resolve(argv[0], env)
    if user is None and warden is not None and warden.alive:
        child = _posix_spawn(executable, argv, env, on_output)
        warden.watch(child.pid)
        return child
    as_user: dict[str, Any] = {}
    if user is not None:
        as_user = {"user": user.uid, "group": user.gid, "extra_groups": list(user.groups)}
    read_fd, write_fd = os.pipe()
    try:
        # Called on the loop's thread: the parent-death signal follows the thread
        # that forked the child, and this one lives as long as we do.
        # The resolved path goes to setpriv (which searches no PATH of ours); without
        # it, ``executable`` keeps the command's own argv[0].
        command, hook = lifeline(
            [executable, *argv[1:]], env, switches_user=user is not None, warden=warden
        )
        if hook is not None:
            command = list(argv)
        process = subprocess.Popen(  # noqa: ASYNC220 - a fork+exec, a few ms
            command,
            executable=None if hook is None else executable,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            preexec_fn=hook,
            **as_user,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    if warden is not None and warden.alive:
        warden.watch(process.pid)
    return Child(process.pid, read_fd, on_output, wait=process.wait)


def _posix_spawn(
    executable: str, argv: Sequence[str], env: Mapping[str, str], on_output: Output | None
) -> Child:
    """posix_spawn in a new session: glibc's vfork-style clone, no exec in front.

    What it cannot do, close inherited descriptors, Python's own never need: they are
    all opened close-on-exec.
    """
    read_fd, write_fd = os.pipe()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, write_fd, 1),
        (os.POSIX_SPAWN_DUP2, write_fd, 2),
    ]
    try:
        pid = os.posix_spawn(executable, list(argv), dict(env), file_actions=actions, setsid=True)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return Child(pid, read_fd, on_output)


class PipedChild(Child):
    """A helper process we talk to: lines to its stdin, its stdout to ``on_output``."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, on_output: Output) -> None:
        super().__init__(pid, stdout_fd, on_output)
        # Non-blocking: a write goes straight into the pipe from the loop, and what a
        # full pipe refuses waits for the loop to see it writable (a thread hop per
        # line, as before, was a good part of a launch's cost).
        os.set_blocking(stdin_fd, False)
        self._stdin = stdin_fd
        self._write_lock = asyncio.Lock()
        self._blocked: asyncio.Future[None] | None = None  # a write waiting for room

    async def write(self, data: bytes) -> None:
        """Write to its stdin; a full pipe must not block the loop."""
        async with self._write_lock:
            view = memoryview(data)
            while view:
                if self._stdin < 0:
                    raise BrokenPipeError("stdin is closed")
                try:
                    view = view[os.write(self._stdin, view) :]
                except BlockingIOError:
                    await self._writable()

    async def _writable(self) -> None:
        """Until the pipe has room again (or stdin is closed meanwhile)."""
        loop = asyncio.get_running_loop()
        fd = self._stdin
        self._blocked = blocked = loop.create_future()
        loop.add_writer(fd, _wake, blocked)
        try:
            await blocked
        finally:
            self._blocked = None
            if self._stdin == fd:  # close_stdin has already let the fd go otherwise
                loop.remove_writer(fd)

    def close_stdin(self) -> None:
        if self._stdin >= 0:
            fd, self._stdin = self._stdin, -1
            if self._blocked is not None:
                # Stop watching before the number can be reused; the write wakes up
                # and finds stdin closed.
                asyncio.get_running_loop().remove_writer(fd)
                _wake(self._blocked)
            os.close(fd)


def _wake(blocked: asyncio.Future[None]) -> None:
    if not blocked.done():
        blocked.set_result(None)


async def spawn_piped(argv: Sequence[str], env: Mapping[str, str], on_output: Output) -> PipedChild:
    """Start a helper process with pipes on stdin and stdout; stderr is shared with ours.

    posix_spawn also keeps grpc's fork handlers out of it: they run on fork(),
    not on a vfork-style clone, and complain when other threads use grpc.
    """
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    actions = [
        (os.POSIX_SPAWN_DUP2, in_read, 0),
        (os.POSIX_SPAWN_DUP2, out_write, 1),
    ]
    try:
        pid = os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions)  # noqa: ASYNC221
    except BaseException:
        os.close(in_write)
        os.close(out_read)
        raise
    finally:
        os.close(in_read)
        os.close(out_write)
    return PipedChild(pid, in_write, out_read, on_output)
