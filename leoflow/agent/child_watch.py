"""Commands reaped through a pidfd on the event loop, not by a thread per command.

On Python 3.11 asyncio's default child watcher starts a thread for every child, which
blocks in ``waitpid`` and hands the exit back to the loop: in a pool agent running a
stream of short commands that thread's start was about a tenth of the agent's CPU per
task. A pidfd (Linux 5.3+) becomes readable when its process exits, so the loop itself
notices, with no thread. Python 3.12 does this on its own where it can; there this
module does nothing.

The watcher is bound to one loop, so it is installed for the duration of one
``asyncio.run`` and the previous one restored afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator


def _pidfd_works() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        fd = os.pidfd_open(os.getpid())
    except OSError:  # an older kernel, or a seccomp profile that refuses it
        return False
    os.close(fd)
    return True


@contextlib.contextmanager
def pidfd_reaping() -> Iterator[None]:
    """Inside a running loop: reap this loop's children through pidfds until exit."""
    if sys.version_info >= (3, 12) or not _pidfd_works():
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        previous = asyncio.get_child_watcher()
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.set_child_watcher(previous)
            watcher.close()
