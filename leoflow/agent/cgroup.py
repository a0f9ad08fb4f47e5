"""The kernel's OOM-kill counter for the agent's own cgroup.

The agent samples it before and after a task's process: a rise means the kernel
killed something in this cgroup for memory, whatever the exit code says (137 is
any SIGKILL). Where it lives:

- cgroup v2: ``<root>/<path>/memory.events``, key ``oom_kill``, where ``<path>`` is
  the ``0::`` line of /proc/self/cgroup;
- cgroup v1: ``<root>/memory/<path>/memory.oom_control``, key ``oom_kill`` (kernel
  4.13+), ``<path>`` from the line naming the ``memory`` controller;
- then the same two files directly under ``<root>``: a container sees its own
  cgroup there, whatever /proc/self/cgroup says.

``<root>`` is ``LEOFLOW_CGROUP_ROOT`` (default /sys/fs/cgroup), so tests can point
it at a fake directory.
"""

from __future__ import annotations

import os

# Added to a task's oom_score_adj in a pod or container (raising it needs no privilege).
OOM_SCORE_BOOST = 500


def prefer_as_oom_victim(pid: int, *, in_container: bool | None = None) -> None:
    """In a pod or container, make the task, not its agent, the kernel's choice when
    their cgroup runs out of memory. The agent there is PID 1 and shares the task's
    cgroup: killed, it takes the container and its OOM counter with it, and the try
    ends as a bare SIGKILL (the engine's OOMKilled is false on cgroup v1 with runc).
    Alive, it reads the counter and tells OOM. On a Lite host nothing changes."""
    if not (os.environ.get("LEOFLOW_POD_NAME") if in_container is None else in_container):
        return
    path = f"/proc/{pid}/oom_score_adj"
    try:
        with open(path, "r+", encoding="ascii") as f:
            current = int(f.read().strip() or 0)
            f.seek(0)
            f.write(str(min(1000, current + OOM_SCORE_BOOST)))
    except (OSError, ValueError):
        pass  # gone already, or a kernel without it: the counter still tells OOM


class OomCounter:
    def __init__(self, path: str | None, looked_at: tuple[str, ...]) -> None:
        self.path = path
        self.looked_at = looked_at
        # Kept open: a cgroup file's open() was most of a read (~70 us, twice a task);
        # reading it again from offset 0 gives its content as of now.
        self._fd = -1

    def read(self) -> int | None:
        """The counter now; None when there is none or it cannot be read."""
        if self.path is None:
            return None
        for _ in range(2):  # a file that went away is opened again once
            if self._fd < 0:
                try:
                    self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    return None
            try:
                data = os.pread(self._fd, 4096, 0)
            except OSError:
                os.close(self._fd)
                self._fd = -1
                continue
            try:
                return _oom_kill_of(data.decode("ascii"))
            except UnicodeDecodeError:
                return None
        return None

    def describe_absence(self) -> str:
        return (
            "no cgroup OOM-kill counter found (looked at "
            + ", ".join(self.looked_at)
            + "); a task killed for memory will be reported by its exit code only"
        )


def find_oom_counter(root: str, proc_cgroup: str = "/proc/self/cgroup") -> OomCounter:
    v2_path, v1_path = _own_cgroup_paths(proc_cgroup)
    candidates: list[str] = []
    if v2_path is not None:
        candidates.append(_join(root, v2_path, "memory.events"))
    if v1_path is not None:
        candidates.append(_join(root, "memory", v1_path, "memory.oom_control"))
    candidates.append(os.path.join(root, "memory.events"))
    candidates.append(os.path.join(root, "memory", "memory.oom_control"))
    looked_at = tuple(dict.fromkeys(candidates))
    for path in looked_at:
        if _read_oom_kill(path) is not None:
            return OomCounter(path, looked_at)
    return OomCounter(None, looked_at)


def _own_cgroup_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    v2 = v1 = None
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _join(root: str, *parts: str) -> str:
    return os.path.join(root, *(p.strip("/") for p in parts if p.strip("/")))


def _read_oom_kill(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    return _oom_kill_of(text)


def _oom_kill_of(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            try:
                return int(value)
            except ValueError:
                return None
    return None
