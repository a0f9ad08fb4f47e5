"""A try's scratch directory made before it is asked for, and removed after, on a thread.

Making and removing a directory is slow on some disks: on this machine's ext4 a
``mkdtemp`` and its removal cost ~0.4 ms of CPU and ~3 ms of waiting, where a file costs
microseconds, and all of it ran on the event loop that serves every other task of the
agent meanwhile (a 50-task chain spent ~0.3 s of its wall time there). So one thread
keeps a directory ready under each base it was asked for and removes the directories
tries are done with. Each directory is still ``mkdtemp``'s (private, mode 0700) and
still used by one try only; a try that finds none ready makes its own at once.

A try that needs only a file to write its output to (no inputs, no task user to hand a
directory to) gets no directory at all: a fresh name in one private directory of the
process (``output_path``), removed when the try ends.

Stdlib only: the agent and Lite's subprocess executor share it.
"""

from __future__ import annotations

import atexit
import os
import queue
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Sequence

PREFIX = "leoflow-io-"
_AHEAD = 8  # ready directories per base, at most (a take that finds none adds one)
_EXIT_WAIT = 1.0  # seconds, at exit, for the removals still queued (under Lite's stop grace)

INPUTS = "inputs"  # the subdirectory a try with inputs gets
_Key = tuple[str, bool]  # (base, with an inputs subdirectory)
# ("make", key) | ("remove", (root, what was made in it)) | None: stop
_Job = tuple[str, _Key | tuple[str, tuple[str, ...]]] | None
# Removals queued at most; past it a try's directory is removed where it ended. The
# process waits _EXIT_WAIT for the queue at exit, then ends without it.
_BACKLOG = 256


class Scratch:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[_Key, list[str]] = {}
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._shared: dict[str, str] = {}  # base -> this process's output directory
        # Names in it: unguessable per process, then counted (no syscall per name).
        self._name_prefix = secrets.token_hex(8)
        self._named = 0
        atexit.register(self._remove_shared)

    def take(self, base: str, *, inputs: bool = False) -> str:
        """A fresh private directory under ``base`` (with an empty ``inputs`` in it if
        asked); OSError as ``mkdtemp`` raises it."""
        key = (base, inputs)
        with self._lock:
            ready = self._ready.get(key, [])
            while ready:
                root = ready.pop()
                if _still_private(root):
                    break
            else:
                root = ""
        self._submit(("make", key))
        return root or _make(key)

    def output_path(self, base: str) -> str:
        """A path no one has used, in this process's own private directory under
        ``base``: for a try that needs a file to write and nothing else, so it costs no
        directory of its own (made and removed per try, those waited on the disk's
        journal behind the store's commits: ~1.5 ms a mkdir on the loop in a fan-out).
        The directory is ``mkdtemp``'s, made once and again if it was replaced."""
        with self._lock:
            shared = self._shared.get(base, "")
            if not shared or not _still_private(shared):
                shared = self._shared[base] = tempfile.mkdtemp(prefix=PREFIX, dir=base)
            self._named += 1
            number = self._named
        return os.path.join(shared, f"{self._name_prefix}-{number}.output.json")

    def discard(self, root: str, made: Sequence[str] = ()) -> None:
        """Remove ``root`` and what is in it, soon (``remove_tree``). With too many
        removals queued, now: the thread must not fall behind without bound, since
        whatever is still queued when the process ends stays on the disk."""
        if self._jobs.qsize() >= _BACKLOG:
            remove_tree(root, made)
        else:
            self._submit(("remove", (root, tuple(made))))

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="leoflow-scratch", daemon=True
                )
                self._thread.start()
                atexit.register(self.close)
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            kind, what = job
            if kind == "remove":
                root, made = what
                assert isinstance(root, str) and isinstance(made, tuple)
                remove_tree(root, made)
                continue
            assert isinstance(what[1], bool)
            with self._lock:
                if len(self._ready.get(what, ())) >= _AHEAD:
                    continue
            try:
                root = _make(what)
            except OSError:  # the try that asks next makes its own and says why
                continue
            with self._lock:
                self._ready.setdefault(what, []).append(root)

    def forget(self, base: str) -> None:
        """Stop using ``base`` (its owner removes it whole): no ready directory or
        output directory in it is handed out again."""
        with self._lock:
            for key in [key for key in self._ready if key[0] == base]:
                del self._ready[key]
            self._shared.pop(base, None)

    def close(self) -> None:
        """Finish the queued removals (a moment at most) and remove the ready directories."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join(_EXIT_WAIT)
        with self._lock:
            ready = [root for roots in self._ready.values() for root in roots]
            self._ready.clear()
        for root in ready:
            shutil.rmtree(root, ignore_errors=True)
        self._remove_shared()

    def _remove_shared(self) -> None:
        with self._lock:
            shared = list(self._shared.values())
            self._shared.clear()
        for root in shared:
            shutil.rmtree(root, ignore_errors=True)


def remove_tree(root: str, made: Sequence[str] = ()) -> None:
    """Remove ``root`` and everything in it. ``made``: the files put in it, unlinked one
    by one first; that is all there is unless the command added something, and then the
    directory is walked (an rmtree opens, lists and checks each directory: twice the
    cost of a try's few unlinks). Only for a directory whose command runs as we do: one
    by one, a path follows a symbolic link its command put in place of a directory,
    rmtree does not."""
    try:
        for path in made:
            os.unlink(path)
        os.rmdir(root)
    except OSError:
        shutil.rmtree(root, ignore_errors=True)


def _make(key: _Key) -> str:
    root = tempfile.mkdtemp(prefix=PREFIX, dir=key[0])
    if key[1]:
        os.mkdir(os.path.join(root, INPUTS))
    return root


def _still_private(root: str) -> bool:
    """Still the directory we made: not removed or replaced since, nobody else's."""
    try:
        st = os.lstat(root)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0


SCRATCH = Scratch()
