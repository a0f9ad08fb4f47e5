"""Lite's private directories in ``TMPDIR``, and removing the ones a kill left behind.

Lite makes a few directories there for as long as it runs: its pool agent's scratch
directory (``leoflow-agent-*``), ``leoflow run``'s endpoint socket (``leoflow-run-*``)
and, with ``--executor subprocess``, its tries' files (``leoflow-lite-*``). Each is
removed when its user ends, but a ``kill -9`` of Lite and its agent together (the OOM
killer, a ``kill -9`` of the process group) ends them before they can.

So each process that uses such a directory holds a shared ``flock(2)`` on it while it
does (an agent takes its own on the directory Lite gave it), and ``sweep`` (run as Lite
starts) removes each one of ours that nobody holds any more. A lock, not a pid in the
name: it cannot be fooled by a reused pid, and it holds between PID namespaces that
share one /tmp. A directory younger than ``MIN_AGE`` is left alone: between its
``mkdtemp`` and its lock it is nobody's yet.

Stdlib only: the agent uses it too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import time

PREFIXES = ("leoflow-agent-", "leoflow-run-", "leoflow-lite-")
MIN_AGE = 60.0  # seconds

_held: dict[str, int] = {}  # path -> the descriptor our lock is on


def tmpdir() -> str:
    """``TMPDIR``, else /tmp: the one writable path under a read-only root filesystem."""
    return os.environ.get("TMPDIR") or "/tmp"


def make(prefix: str, *, mode: int = 0o700) -> str:
    """A new private directory in TMPDIR, held by this process until ``remove``."""
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"{prefix!r}: not a prefix that sweep knows")
    path = tempfile.mkdtemp(prefix=prefix, dir=tmpdir())
    try:
        if mode != 0o700:
            os.chmod(path, mode)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    # Where locks are not to be had, sweep cannot lock it either, and leaves it be.
    hold(path)
    return path


def scratch_dir(prefix: str) -> str:
    """A Lite executor's directory for its tries' files: ``make`` with mode 0711 (a task
    user reaches its own try's directory in it, and lists nothing), after a ``sweep`` of
    what a kill -9 of an earlier Lite left (once a process, off the caller's thread)."""
    sweep_in_background()
    return make(prefix, mode=0o711)


def _open_dir(path: str) -> int:
    """A descriptor to lock ``path`` with: a directory, never through a link."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def hold(path: str) -> bool:
    """Hold ``path`` for this process (a shared lock; other holders may too). False when
    it cannot be opened or locked (gone, not a directory, a filesystem without locks)."""
    if path in _held:
        return True
    try:
        fd = _open_dir(path)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[path] = fd
    return True


def release(path: str) -> None:
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def remove(path: str) -> None:
    """Remove a directory this process made, and stop holding it."""
    shutil.rmtree(path, ignore_errors=True)
    release(path)


def sweep(base: str | None = None, *, min_age: float = MIN_AGE) -> list[str]:
    """Remove the directories of ours in ``base`` (TMPDIR) that nobody holds; the paths
    removed. Only ours: a directory (not a link to one) of this user, with one of our
    prefixes, older than ``min_age``."""
    base = base or tmpdir()
    removed: list[str] = []
    now = time.time()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIXES) or entry.path in _held:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if now - st.st_mtime < min_age:
            continue
        if _remove_if_unheld(entry.path):
            removed.append(entry.path)
    return removed


def _remove_if_unheld(path: str) -> bool:
    try:
        fd = _open_dir(path)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its process lives
            return False
        # Ours now: a process that comes to hold it after this would find it gone.
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.lexists(path)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


_swept = False


def sweep_in_background() -> None:
    """``sweep`` TMPDIR once a process, on a thread of its own: Lite's start does not
    wait for a listing of /tmp."""
    global _swept
    if _swept:
        return
    _swept = True
    import threading

    threading.Thread(target=sweep, name="leoflow-sweep", daemon=True).start()
