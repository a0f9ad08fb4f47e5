"""One small process per agent that kills its commands' process groups when it dies.

A command must not outlive the process that started it: if the agent (or Lite's
direct executor) is killed with SIGKILL, nothing in it runs any more to kill what it
started. ``lifeline``'s answer is per command: the kernel's parent-death signal,
asked for by ``setpriv`` in front of the command (an extra exec, ~1 ms of CPU a task
here, more than the rest of Lite's control plane spends on it) or by a Python hook
in the child.

The warden answers once per process instead. It is started at the first command, in
a session of its own (a kill of our process group does not reach it), and reads
lines from a pipe whose only writer is us: ``+PGID`` when a command starts, ``-PGID``
once it has ended. Whatever way we end, the kernel closes our end of the pipe; the
warden reads EOF and sends SIGKILL to every group still listed, then exits. That
covers more than the parent-death signal did: the whole process group (what the
command started in the background too), not only its first process.

A command's group is listed just after it is started, so a SIGKILL that lands in
between (microseconds; setpriv's own window was its exec, milliseconds) leaves that
command to whoever watches us (Lite kills the groups of a pool agent that died). A
group is struck off once its command was reaped and its output drained; Linux does
not hand a number that is still some group's id to a new process, so a listed id
names our group for as long as any of its processes lives.

If the warden cannot start, or dies, ``alive`` is False and commands go back to
``lifeline``'s per-command way.
"""

from __future__ import annotations

import contextlib
import os
import sys

# While groups are listed the warden naps between reads, so the lines of many commands
# come in one read: a reader blocked on the pipe is woken by every write, and those
# wake-ups cost the agent ~35 us a write and the warden a loop turn each, two a command.
# A nap only delays what it reads: whatever it has not read when we end is still in the
# pipe before the EOF, so no line is missed. The nap waits on a second pipe (fd 3) that
# we never write to: it ends early when that pipe closes, which is when we close the
# warden or die, so neither a clean stop nor the kill waits out a nap.
NAP = 0.25

# -I -S: no site, no user paths; the program needs os, select and signal (~10 ms to start).
_PROGRAM = """
import os, select, signal
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
groups, rest = set(), b""
while True:
    try:
        data = os.read(0, 65536)
    except InterruptedError:
        continue
    if not data:
        break
    *lines, rest = (rest + data).split(b"\\n")
    for line in lines:
        if line[:1] == b"+":
            groups.add(int(line[1:]))
        elif line[:1] == b"-":
            groups.discard(int(line[1:]))
    if groups:
        select.select([3], [], [], NAP)
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class Warden:
    """Our end of a warden process: tell it which process groups to kill if we die."""

    def __init__(self, pid: int, pipe: int, wake: int) -> None:
        self.pid = pid
        self._pipe = pipe
        self._wake = wake  # closed, never written: ends the warden's nap

    @classmethod
    def start(cls) -> Warden | None:
        """A new warden, or None where one cannot run (not Linux, no interpreter)."""
        if not sys.platform.startswith("linux") or not sys.executable:
            return None
        # All four close-on-exec: no command inherits them (an inherited write end
        # would keep the warden from seeing us go).
        read_end, write_end = os.pipe()
        wake_read, wake_write = os.pipe()
        try:
            pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _PROGRAM.replace("NAP", repr(NAP))],
                {"PATH": os.defpath},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_DUP2, wake_read, 3),
                ],
                setsid=True,
            )
        except OSError:
            os.close(write_end)
            os.close(wake_write)
            return None
        finally:
            os.close(read_end)
            os.close(wake_read)
        return cls(pid, write_end, wake_write)

    @property
    def alive(self) -> bool:
        return self._pipe >= 0

    def watch(self, group: int) -> None:
        """Kill process group ``group`` if we die before ``forget(group)``."""
        self._send(b"+%d\n" % group)

    def forget(self, group: int) -> None:
        self._send(b"-%d\n" % group)

    def _send(self, line: bytes) -> None:
        # A few bytes into a pipe the warden keeps empty: never a wait worth a thread.
        if self._pipe < 0:
            return
        try:
            os.write(self._pipe, line)
        except OSError:  # the warden is gone: commands fall back to the per-command way
            self.close()

    def close(self) -> None:
        """Let the warden go: it kills what is still listed (nothing, after a clean
        stop) and exits; reaped here so it leaves no zombie."""
        if self._pipe < 0:
            return
        os.close(self._pipe)
        os.close(self._wake)
        self._pipe = self._wake = -1
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
