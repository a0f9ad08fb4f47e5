"""What /proc says of a process: its command name, and whether it is gone."""

from __future__ import annotations

from pathlib import Path


def comm(pid: int) -> str:
    """The process's command name ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie waiting for a reaper (init) to collect it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"
