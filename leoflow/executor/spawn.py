"""Start child processes cheaply from an event loop.

Each task runs in its own session, so a timeout or cancel can kill its whole
process group. Both obvious ways to start such a child are slow in a process
this size: uvloop spawns with fork() (~5 ms a child here), and CPython 3.11's
subprocess gives up vfork() as soon as ``start_new_session`` is set (~2.6 ms).
``os.posix_spawn`` with ``setsid`` keeps glibc's vfork-style clone (~0.9 ms).
Each child is awaited by a thread blocked in waitpid(). A pidfd watched by the
loop would save the thread, but under uvloop a pidfd that reuses the number of a
pipe whose transport is still closing never reported readiness: children stayed
zombies and runs hung (seen in the 200-task fan-out benchmark).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

# One thread per running child, blocked in waitpid(); idle threads are reused.
_REAPERS = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="leoflow-reaper")


def _exit_code(status: int) -> int:
    """Like Popen.returncode: the exit status, or minus the signal that killed it."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Child:
    """A running child process with an awaitable exit."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pipe: object | None = None
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._watch()

    def _watch(self) -> None:
        asyncio.get_running_loop().run_in_executor(_REAPERS, self._wait_blocking)

    def _wait_blocking(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self._exit.get_loop().call_soon_threadsafe(self._settle, _exit_code(status))

    def _settle(self, code: int) -> None:
        if not self._exit.done():
            self._exit.set_result(code)

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    capture: bool = True,
) -> tuple[Child, asyncio.StreamReader | None]:
    """Start ``argv`` in a new session; return it and a stream of its stdout+stderr."""
    executable = argv[0]
    if os.sep not in executable:
        found = shutil.which(executable, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(2, "command not found in PATH", executable)
        executable = found
    actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)
    ]
    read_fd = write_fd = -1
    if capture:
        read_fd, write_fd = os.pipe()
        actions += [
            (os.POSIX_SPAWN_DUP2, write_fd, 1),
            (os.POSIX_SPAWN_DUP2, write_fd, 2),
        ]
    else:
        actions += [
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
    try:
        pid = os.posix_spawn(  # noqa: ASYNC221 - a vfork-style clone, well under 1 ms
            executable, list(argv), dict(env), file_actions=actions, setsid=True
        )
    except BaseException:
        if capture:
            os.close(read_fd)
            os.close(write_fd)
        raise
    child = Child(pid)
    if not capture:
        return child, None
    os.close(write_fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20, loop=loop)
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    child.pipe = pipe  # held until the child is gone, so the fd is not closed under the loop
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except BaseException:
        pipe.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, 9)
        raise
    return child, reader


class PipedChild(Child):
    """A child we talk to: its stdin as a writer, its stdout as a reader."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader) -> None:
        super().__init__(pid)
        self.stdin = stdin
        self.stdout = stdout


async def spawn_piped(argv: Sequence[str], env: Mapping[str, str]) -> PipedChild:
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
    finally:
        os.close(in_read)
        os.close(out_write)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(out_read, "rb", buffering=0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(in_write, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return PipedChild(pid, writer, reader)
