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

``lifeline`` prefers util-linux's ``setpriv --pdeathsig KILL`` in front of the command
to the hook: a ``preexec_fn`` makes CPython fork instead of vfork and run Python in
the child, whose refcount writes copy pages of the whole agent. 200 spawns of
``true`` from an agent-sized process, here: 2.0-2.2 ms of the agent's own CPU per
spawn with the hook, 0.8-1.0 ms with setpriv (3.3 ms wall with neither, 6.5 with
the hook, 5.1 with setpriv: setpriv's own exec is the difference). The hook stays
where setpriv is missing or cannot take over: a program that is not found (so the
agent's own "command not found" sentence stays), or a task user to switch to (setpriv
would run as that user, and a permission error would read as the command's own exit).
setpriv does not re-check the parent after its request as the hook does, and makes
it a few milliseconds later (its own exec): an agent killed in that window leaves the
command to whoever watches the agent (Lite kills the process group).

A process that starts many commands (Lite's pool agent, its direct executor) keeps a
``Warden`` instead, which kills each command's whole group when we die and costs no
exec per command; with a live warden ``lifeline`` leaves the command as it is.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from leoflow.agent.warden import Warden

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


@functools.cache
def _setpriv() -> str | None:
    """setpriv's path if it exists and takes ``--pdeathsig`` (util-linux 2.33+)."""
    if not sys.platform.startswith("linux"):
        return None
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        probe = subprocess.run(
            [path, "--pdeathsig", "KILL", "--", path, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


def _found(program: str, env: Mapping[str, str], cwd: str | None) -> bool:
    if os.sep in program:
        where = program if os.path.isabs(program) else os.path.join(cwd or os.getcwd(), program)
        return os.path.isfile(where) and os.access(where, os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


def lifeline(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
    switches_user: bool = False,
    warden: Warden | None = None,
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to start and the ``preexec_fn`` to pass, so that the command gets
    SIGKILL when this process dies: nothing to add where a live ``warden`` will be
    told of the command's group, else setpriv in front where it can stand in for the
    hook (see the module docstring), else the hook."""
    command = list(argv)
    if warden is not None and warden.alive:
        return command, None
    setpriv = None if switches_user or not command else _setpriv()
    if setpriv is not None and _found(command[0], env, cwd):
        return [setpriv, "--pdeathsig", "KILL", "--", *command], None
    return command, parent_death_hook()
