"""A DAG file loaded through the dbt expander in a child process, with its peak memory.

The child may grow its address space by 1 GiB past what its imports took (reading
``/dev/zero`` whole ends there, not in the machine's swap) and is killed after
``timeout`` seconds (a load blocked on a FIFO never ends): a regression fails a test
instead of hanging the suite. ``source`` runs another checkout's ``leoflow`` (a
benchmark's before and after).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = """
import json, resource, sys
from pathlib import Path
from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dagfile.problems import DagFileError
from leoflow.dbt.project import expander

with open("/proc/self/statm") as statm:
    size = int(statm.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    loaded = load_dag_file(Path(sys.argv[1]), LoadOptions(dbt=expander(Path(sys.argv[2]))))
    out = {"tasks": sorted(loaded.spec.tasks)}
except DagFileError as exc:
    out = {"error": str(exc)}
out["grew_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps(out))
"""


class LoadBlocked(AssertionError):
    """The child did not finish within its timeout."""


def load_in_child(
    dag_file: Path, cache: Path, *, timeout: float, source: Path | None = None
) -> dict[str, Any]:
    """``{"tasks": [...]}`` or ``{"error": text}``, with ``grew_kb``: the child's peak
    RSS above what it had before the load."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(dag_file), str(cache)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
            cwd=str(source) if source is not None else None,
        )
    except subprocess.TimeoutExpired as exc:
        raise LoadBlocked(f"loading {dag_file} did not finish within {timeout:g}s") from exc
    if done.returncode != 0:
        raise AssertionError(f"the load crashed (exit {done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result
