"""The open-files limit of a long-running process (Lite, the scheduler, the API,
``leoflow run``, the warm agent), raised at start.

Most systems give a process a soft limit of 1,024 descriptors and a far higher hard
limit (systemd: 524,288): the soft default only protects old programs that use
``select()``. A server holding one descriptor per connection, per database connection
and per task pipe reaches 1,024 long before its hard limit, so it raises the soft
limit to the hard one, as nginx (``worker_rlimit_nofile``) and Go's runtime do.
Stdlib only: the agent imports it.
"""

from __future__ import annotations

import resource

# Where the hard limit is "unlimited", a finite ceiling (the kernel's nr_open default).
_CEILING = 1024 * 1024


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; the soft limit now.

    Never fails: a limit that cannot be raised (a sandbox refusing setrlimit) stays."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft
