"""Start a task's command without stopping the agent's event loop meanwhile.

``loop.subprocess_exec`` forks on the loop's thread, and on CPython 3.11 the GIL stays
held while a vfork child runs up to its exec (3.12 lets it go): the loop stood still
~1.2-1.5 ms for every command a pool agent started, longer than the rest of the
agent's work for a task, so in a wide fan-out the agent's one thread was the
bottleneck, not the machine. ctypes releases the GIL around a foreign call, so here
libc's ``posix_spawn`` (glibc's vfork-style clone) runs in a worker thread while the
loop goes on serving the other tasks. The child is then followed on the loop: its
output through two pipes, its exit through a pidfd, under a transport that speaks
``asyncio.SubprocessTransport`` to the same ``ChildProtocol``.

The child gets what ``subprocess`` would give it with ``process_group=0``: a process
group of its own, stdin from /dev/null, stdout and stderr into the pipes, the working
directory, an empty signal mask and SIGPIPE/SIGXFSZ back at their defaults
(``restore_signals``). Descriptors are not closed one by one: everything Python and
grpc open is close-on-exec. A NUL byte or a bad variable name is the same ValueError.

``spawn`` returns None where it cannot stand in, and the caller takes the usual path:
not Linux with glibc, no pidfd (Linux < 5.3, a seccomp profile), a working directory
without ``posix_spawn_file_actions_addchdir_np`` (glibc < 2.29), a program not found
on the command's own PATH where it differs from ours (so the usual path words the
failure).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

# glibc's (and musl's) posix_spawnattr flags.
_SETPGROUP = 0x02
_SETSIGDEF = 0x04
_SETSIGMASK = 0x08
# Opaque glibc types, sized with room to spare (80, 336 and 128 bytes on x86-64).
_ACTIONS_SIZE = 512
_ATTR_SIZE = 1024
_SIGSET_SIZE = 256

# As much as one read of a pipe takes (asyncio's read-pipe transport takes as much).
_READ_MAX = 256 * 1024

# A few threads: each is held only while its child runs up to exec.
_threads = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="leoflow-spawn")


@functools.cache
def _libc() -> Any | None:
    try:
        libc_name = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc_name = ""
    if not sys.platform.startswith("linux") or not libc_name.startswith("glibc"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.posix_spawn  # noqa: B018 - present, or AttributeError
    except (OSError, AttributeError):
        return None
    if not _pidfd_works():
        return None
    return libc


def _pidfd_works() -> bool:
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


def _cstrings(items: Sequence[bytes]) -> Any:
    array = (ctypes.c_char_p * (len(items) + 1))()
    array[: len(items)] = list(items)
    array[len(items)] = None
    return array


def _encode(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None
) -> tuple[list[bytes], list[bytes], bytes | None]:
    """argv, ``KEY=value`` lines and cwd as exec takes them (os.fsencode's encoding);
    the ValueErrors subprocess raises for what exec cannot take."""
    code = sys.getfilesystemencoding()
    for text in (*argv, *([cwd] if cwd is not None else [])):
        if "\0" in text:
            raise ValueError("embedded null byte")
    pairs = []
    for key, value in env.items():
        if not key or "=" in key or "\0" in key:
            raise ValueError("illegal environment variable name")
        if "\0" in value:
            raise ValueError("embedded null byte")
        pairs.append(f"{key}={value}".encode(code, "surrogateescape"))
    args = [a.encode(code, "surrogateescape") for a in argv]
    return args, pairs, None if cwd is None else cwd.encode(code, "surrogateescape")


def _resolve(program: str, env: Mapping[str, str]) -> tuple[str, bool] | None:
    """What to give posix_spawn, and whether it is to search PATH itself (posix_spawnp
    searches ours, so only when the command's PATH is ours: no stat per directory here)."""
    if os.sep in program:
        return program, False  # relative to the working directory, as exec takes it
    path = env.get("PATH", os.defpath)
    if path == os.environ.get("PATH", os.defpath):
        return program, True
    found = shutil.which(program, path=path)
    return (found, False) if found is not None and os.path.isabs(found) else None


def _spawn(
    libc: Any,
    search: bool,
    path: bytes,
    args: list[bytes],
    envp: list[bytes],
    cwd: bytes | None,
    out: int,
    err: int,
) -> int:
    """posix_spawn with the file actions and attributes the module docstring lists;
    runs in a worker thread (ctypes lets the GIL go for the call), or on the loop."""
    actions = ctypes.create_string_buffer(_ACTIONS_SIZE)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    mask = ctypes.create_string_buffer(_SIGSET_SIZE)
    defaults = ctypes.create_string_buffer(_SIGSET_SIZE)
    libc.posix_spawn_file_actions_init(actions)
    libc.posix_spawnattr_init(attr)
    try:
        steps = [
            libc.posix_spawn_file_actions_addopen(actions, 0, b"/dev/null", os.O_RDONLY, 0),
            libc.posix_spawn_file_actions_adddup2(actions, out, 1),
            libc.posix_spawn_file_actions_adddup2(actions, err, 2),
        ]
        if cwd is not None:
            steps.append(libc.posix_spawn_file_actions_addchdir_np(actions, cwd))
        libc.sigemptyset(mask)
        libc.sigemptyset(defaults)
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):
            libc.sigaddset(defaults, int(signum))
        steps += [
            libc.posix_spawnattr_setflags(
                attr, ctypes.c_short(_SETPGROUP | _SETSIGDEF | _SETSIGMASK)
            ),
            libc.posix_spawnattr_setpgroup(attr, 0),
            libc.posix_spawnattr_setsigmask(attr, mask),
            libc.posix_spawnattr_setsigdefault(attr, defaults),
        ]
        failed = next((code for code in steps if code != 0), 0)
        if failed:
            raise OSError(failed, os.strerror(failed))
        pid = ctypes.c_int()
        call = libc.posix_spawnp if search else libc.posix_spawn
        code = call(ctypes.byref(pid), path, actions, attr, _cstrings(args), _cstrings(envp))
        if code != 0:
            raise OSError(code, os.strerror(code), os.fsdecode(args[0]))
        return pid.value
    finally:
        libc.posix_spawn_file_actions_destroy(actions)
        libc.posix_spawnattr_destroy(attr)


class _PipeReader:
    """One of the child's output pipes, read on the loop: ``add_reader`` and ``os.read``,
    handed to its ``SubprocessProtocol`` as fd 1/2. asyncio's read-pipe transport did
    the same behind a file object, an fstat, three scheduled callbacks and a waiter per
    pipe: two pipes a task were ~10% of a pool agent's CPU in a wide fan-out."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        child: asyncio.SubprocessProtocol,
        which: int,
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._child = child
        self._which = which
        self._paused = False
        self._closing = False
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_MAX)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._end(exc)
            return
        if data:
            self._child.pipe_data_received(self._which, data)
        else:
            self._end(None)

    def _end(self, exc: Exception | None) -> None:
        if not self._closing:
            self._closing = True
            self._release()
            self._child.pipe_connection_lost(self._which, exc)

    def _release(self) -> None:
        if not self._paused:
            self._loop.remove_reader(self._fd)
        os.close(self._fd)

    def pause_reading(self) -> None:
        if not self._closing and not self._paused:
            self._paused = True
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._closing and self._paused:
            self._paused = False
            self._loop.add_reader(self._fd, self._readable)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Stop reading; the protocol hears of it on the next loop turn, as asyncio's
        transport tells it."""
        if not self._closing:
            self._closing = True
            self._release()
            self._loop.call_soon(self._child.pipe_connection_lost, self._which, None)


class SpawnedTransport(asyncio.SubprocessTransport):
    """A child started by ``spawn``: its pid, pipes and exit status, as the loop sees them."""

    def __init__(self, pid: int, protocol: asyncio.SubprocessProtocol) -> None:
        super().__init__()
        self._pid = pid
        self._protocol = protocol
        self._pipes: dict[int, _PipeReader] = {}
        self._returncode: int | None = None
        self._pidfd = -1
        self._closed = False

    def get_pid(self) -> int:
        return self._pid

    def get_returncode(self) -> int | None:
        return self._returncode

    def get_pipe_transport(self, fd: int) -> Any:
        return self._pipes.get(fd)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def is_closing(self) -> bool:
        return self._closed

    def send_signal(self, signal: int) -> None:
        if self._returncode is None:
            os.kill(self._pid, signal)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pidfd = os.pidfd_open(self._pid)  # works on a zombie too: nothing is missed
        loop.add_reader(self._pidfd, self._exited, loop)

    def _exited(self, loop: asyncio.AbstractEventLoop) -> None:
        self._stop_watching(loop)
        try:
            # Blocking, as asyncio's own pidfd watcher waits: the pidfd is readable
            # once the child has exited, and WNOHANG in that instant could answer
            # "still running" (0, 0), which would read as exit code 0.
            _, status = os.waitpid(self._pid, 0)
        except ChildProcessError:  # reaped elsewhere: the status is lost
            status = 255 << 8
        self._returncode = os.waitstatus_to_exitcode(status)
        self._protocol.process_exited()

    def _stop_watching(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._pidfd >= 0:
            loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for pipe in self._pipes.values():
            if not pipe.is_closing():
                pipe.close()
        # A child still running keeps running, as asyncio's own transport leaves it;
        # its exit is still reaped so it leaves no zombie.


_P = TypeVar("_P", bound=asyncio.SubprocessProtocol)


async def spawn(
    protocol_factory: Callable[[], _P],
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    *,
    on_loop: bool = False,
) -> tuple[asyncio.SubprocessTransport, _P] | None:
    """Start ``argv`` off the loop (see the module docstring); None: take the usual path.
    ``on_loop``: the caller has nothing else to serve meanwhile (its one task), so the
    child starts on the loop's thread, without the hop to a worker and back (~0.15 ms
    of a task's latency, in a chain of tasks).

    Raises OSError as exec reports it (FileNotFoundError, PermissionError, ...) and
    ValueError for a NUL byte, as ``subprocess`` does.
    """
    libc = _libc()
    if (
        libc is None
        or not argv
        or (cwd and not hasattr(libc, "posix_spawn_file_actions_addchdir_np"))
    ):
        return None
    resolved = _resolve(argv[0], env)
    if resolved is None:
        return None
    path, search = resolved
    args, envp, cwd_bytes = _encode(argv, env, cwd or None)
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        spawn_args = (libc, search, os.fsencode(path), args, envp, cwd_bytes, out_w, err_w)
        if on_loop:
            pid = _spawn(*spawn_args)
        else:
            pid = await loop.run_in_executor(_threads, _spawn, *spawn_args)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    protocol = protocol_factory()
    transport = SpawnedTransport(pid, protocol)
    protocol.connection_made(transport)
    try:
        for fd, read_end in ((1, out_r), (2, err_r)):
            transport._pipes[fd] = _PipeReader(loop, read_end, protocol, fd)
    except BaseException:
        for fd, read_end in ((1, out_r), (2, err_r)):
            if fd not in transport._pipes:
                os.close(read_end)
        transport.close()
        raise
    transport._watch_exit(loop)
    return transport, protocol
