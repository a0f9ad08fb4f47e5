"""Is anything of a process group still alive?

``killpg(pgid, 0)`` says whether the group has members, but a killed process stays
a member until it is reaped: a dead agent's commands are reparented to init (or
to whatever subreaper is above us), which may reap them late or never. So on Linux
the members are read from ``/proc`` and zombies do not count.
"""

from __future__ import annotations

import contextlib
import os


def group_alive(pgid: int) -> bool:
    """True while some process of group ``pgid`` is running (not a zombie)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; another user's process (a task user) still counts
    if not os.path.isdir("/proc/self"):
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False
