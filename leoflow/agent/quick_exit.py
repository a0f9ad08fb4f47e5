"""Ending a command-line process without the interpreter's teardown.

Once a command has returned, CPython still takes every module apart (SQLAlchemy,
pydantic, grpc ...) before the process may exit: for a one-task ``leoflow run``
that was about a third of the CPU its imports cost, and the pool agent's teardown
held up the ``leoflow run`` that waits for it to exit. None of it is needed: the
command closed what it opened, and by the time this runs the interpreter has joined
the non-daemon threads and run every other atexit function (this one is registered
first, so it runs last). Then the buffered output is flushed and the process ends.

Only a command that returned skips the teardown: one that raised gets the usual
exit, traceback and all.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

_returned: list[int] = []


def arm() -> None:
    """Call first in a process's entry point, before any import registers atexit work."""
    atexit.register(_exit_now)


def returned(code: int) -> int:
    """The entry point's command returned ``code``: the process may end without teardown."""
    _returned.append(code)
    return code


def _exit_now() -> None:
    if not _returned:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(_returned[-1] & 0xFF)  # what sys.exit(code) would report
