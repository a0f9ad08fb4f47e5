"""An opt-in trace of where a task's time goes, stage by stage, in a real process.

``LEOFLOW_TRACE_STAGES=path leoflow run dag.yaml`` records, for every try, the
moment it passes each stage of its way through Lite (admitted, launched, sent to
the agent, its ticket exchanged, started, its Complete received, applied by a
tick, answered) and, per tick of the scheduler loop, its start and its commit.
At exit the marks are written to ``path``, one JSON array a line:
``[seconds, stage, a, b]`` (``a``, ``b``: the try's task instance and try
number, or for a tick its number and how many events it applied).
``benchmarks/trace_stages.py`` turns the file into a histogram per stage.

Unset (the default), ``mark`` is one comparison: nothing is kept.
"""

from __future__ import annotations

import atexit
import json
import os
import time

ENV = "LEOFLOW_TRACE_STAGES"

_marks: list[tuple[float, str, int, int]] | None = None
_path: str | None = None


def configure(path: str | None) -> None:
    """Trace to ``path`` from now on (None: stop tracing and drop what was kept)."""
    global _marks, _path
    if path and _path is None:
        atexit.register(write)
    _path = path or None
    _marks = [] if path else None


def enabled() -> bool:
    return _marks is not None


def mark(stage: str, a: int, b: int = 0) -> None:
    if _marks is not None:
        _marks.append((time.perf_counter(), stage, a, b))


def marks() -> list[tuple[float, str, int, int]]:
    """What was recorded so far (empty when tracing is off)."""
    return list(_marks or ())


def write() -> None:
    """Write the marks to the trace file (at exit; callable earlier, and again)."""
    if _marks is None or _path is None:
        return
    with open(_path, "w", encoding="utf-8") as out:
        for entry in _marks:
            out.write(json.dumps(entry, separators=(",", ":")) + "\n")


configure(os.environ.get(ENV))
