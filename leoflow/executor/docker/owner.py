"""Which Lite process a task container belongs to, and whether that process lives.

Every container carries ``leoflow.io/owner=<host>/<pid>/<start time>``. A container
whose owner process is gone (Lite restarted, or was killed) is a leftover: its agent
dialled an endpoint that no longer exists, so it cannot report, and it is stopped
and removed. Two Lites on one engine never touch each other's containers.
"""

from __future__ import annotations

import os
import socket

LABEL_OWNER = "leoflow.io/owner"
LABEL_EXECUTOR = "leoflow.io/executor"
EXECUTOR_VALUE = "docker"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def me() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}/{pid}/{_start_time(pid) or 0}"


def owner_gone(owner: str) -> bool:
    """True when ``owner`` names a process of this host that no longer runs."""
    host, _, rest = owner.partition("/")
    pid_text, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another host's (a shared engine): not ours to judge
    return _start_time(int(pid_text)) != started
