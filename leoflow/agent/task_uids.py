"""One uid per running task, from a range Lite is given: what keeps tasks from each other.

Run as one user, a task can read a concurrently running task's environment (its
secrets) in ``/proc/PID/environ``, its open files in ``/proc/PID/fd`` and whatever it
writes: the kernel lets a process inspect any other of the same uid. With
``LEOFLOW_TASK_UIDS=START-END`` (Lite run as root) the agent gives each try a uid
(and a group of the same number) no other running try has, as systemd's
``DynamicUser`` does, so those reads are refused by the kernel. The try's directory
(its ``HOME`` and ``TMPDIR``, its inputs, output and exit reason) is owned by that uid
with mode 0700, and the command starts with umask 077.

A uid goes back into the range only once nothing runs under it any more: whatever
the try left behind (a daemon that escaped its process group) is killed first, so a
later try given the same uid cannot meet it; before a uid is handed out again, what
it owns at the top of ``/tmp``, ``/var/tmp`` and ``/dev/shm`` is removed too. Uids
are handed out least recently used first. Stdlib only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import shutil
import signal

from leoflow.agent.environment import TaskUser

ENV = "LEOFLOW_AGENT_TASK_UIDS"
_KILL_ROUNDS = 50  # a uid whose processes outlive this many sweeps is not reused
# Where any uid may leave files that a later holder of the same uid could read.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


class UidRangeError(ValueError):
    """``START-END`` is not a range of uids."""


def parse_uid_range(spec: str) -> tuple[int, int]:
    """``"61184-61439"`` -> (61184, 61439): at least one uid, none of them root's."""
    start, sep, end = spec.partition("-")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit():
        raise UidRangeError(f"{spec!r} is not START-END (two uids, e.g. 61184-61439)")
    first, last = int(start), int(end)
    if not 0 < first <= last < 2**32 - 1:
        raise UidRangeError(f"{spec!r}: expected 0 < START <= END < 4294967295")
    return first, last


class TaskUids:
    """The range's free uids; ``take`` one for a try, ``release`` it when the try ends."""

    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last
        self._free = collections.deque(range(first, last + 1))

    def exhausted(self) -> str:
        return (
            f"every uid of LEOFLOW_TASK_UIDS ({self.first}-{self.last}) is in use by a "
            "running task (or by what a task left that could not be killed); widen the "
            "range to at least the number of tasks Lite runs at once"
        )

    async def take(self) -> int | None:
        """A free uid with nothing left of an earlier holder (a process, a file in the
        shared temporary directories), or None when every one is in use."""
        while self._free:
            uid = self._free.popleft()
            # A Lite killed with -9 may have left one; so may a try of this agent.
            if await asyncio.to_thread(_clean, uid):
                return uid
        return None

    async def release(self, uid: int) -> None:
        """Kill what still runs under ``uid`` (off the loop), then free it."""
        if await asyncio.to_thread(kill_all_of, uid):
            self._free.append(uid)

    @staticmethod
    def user(uid: int) -> TaskUser:
        """The identity a try runs with: no name in the password database, no groups;
        its home is its directory (``own_files``)."""
        return TaskUser(f"leoflow-task-{uid}", uid, uid, (), "", "/bin/sh")


def own_files(env: dict[str, str], root: str, user: TaskUser) -> str:
    """Point the try's ``HOME`` and ``TMPDIR`` at its own directory and name it; the
    path of its exit-reason file there (not in the shared ``/tmp``, where a peer could
    make the file first and read what is written to it)."""
    env.update(HOME=root, TMPDIR=root, USER=user.name, LOGNAME=user.name, SHELL=user.shell)
    return os.path.join(root, ".exit-reason")


def _clean(uid: int) -> bool:
    if not kill_all_of(uid):
        return False
    remove_files_of(uid)
    return True


def remove_files_of(uid: int, places: tuple[str, ...] = SHARED_TMP) -> None:
    """Remove what ``uid`` owns at the top of the shared temporary directories."""
    for place in places:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)


def kill_all_of(uid: int) -> bool:
    """SIGKILL every process whose real, effective or saved uid is ``uid``; True when
    none is left (a process in uninterruptible sleep may outlive every round)."""
    for _ in range(_KILL_ROUNDS):
        found = _processes_of(uid)
        if not found:
            return True
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return not _processes_of(uid)


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"Uid:"):
                        if str(uid).encode() in line.split()[1:4] and running(int(name)):
                            found.append(int(name))
                        break
        except OSError:  # gone meanwhile
            continue
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie: a zombie needs no kill, only its parent's wait."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return False
    return text[text.rindex(b")") + 2 : text.rindex(b")") + 3] not in (b"Z", b"X")
