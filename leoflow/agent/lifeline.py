"""A task's command dies with the process that started it.

Each command runs in its own process group, so whoever kills it kills everything it
started. That needs someone alive to do it: if the agent (or Lite's direct executor)
is killed with SIGKILL, nothing runs in it any more. So the kernel is asked to send
the command SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and whoever watches
the dead parent (Lite watches its pool agent) kills the rest of the group.

The request is made in the child between fork and exec (``preexec_fn``), after any
setuid/setgid: a change of credentials clears it. It names the parent *thread*, so
children must be started from a thread that lives as long as the process (the event
loop's). Linux only; elsewhere ``parent_death_hook`` returns None.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def parent_death_hook(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``signum`` when we die."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # we died before the request took effect
            os.kill(os.getpid(), signum)

    return hook
