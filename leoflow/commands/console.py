"""What ``leoflow run`` shows: live progress while a run goes, a table when it ends.

On a terminal the task table redraws in place; anywhere else (CI logs, pipes)
each state change is one plain line, so the output reads well in both.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from leoflow.commands.tables import table
from leoflow.domain.durations import format_duration
from leoflow.domain.printable import printable
from leoflow.domain.states import TaskState
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store.rows import TaskInstanceRow

_MARK = {
    TaskState.NONE: "·",
    TaskState.SCHEDULED: "○",
    TaskState.QUEUED: "◔",
    TaskState.RUNNING: "▶",
    TaskState.SUCCESS: "✔",
    TaskState.FAILED: "✘",
    TaskState.UP_FOR_RETRY: "↻",
    TaskState.UPSTREAM_FAILED: "⊘",
    TaskState.SKIPPED: "-",
}


def final_table(tis: Sequence[TaskInstanceRow], order: Sequence[str]) -> str:
    position = {task_id: i for i, task_id in enumerate(order)}
    rows = []
    for ti in sorted(tis, key=lambda t: (position.get(t.task_id, len(position)), t.task_id)):
        duration = (
            format_duration(ti.ended_at - ti.started_at)
            if ti.started_at is not None and ti.ended_at is not None
            else "-"
        )
        reason = ""
        if ti.state is not TaskState.SUCCESS:
            reason = ti.message or ti.reason or ""
        rows.append([ti.task_id, ti.state.value, str(ti.try_number), duration, reason])
    return table(["task", "state", "tries", "duration", "reason"], rows)


class Progress:
    """Follows one run: a ``RunObserver`` (``Runtime.observe``) of the scheduler."""

    def __init__(self, stream: TextIO = sys.stdout, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.run: RunMirror | None = None
        self._started = time.monotonic()
        self._drawn_lines = 0
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        self._flush_due = False

    def run_changed(self, run: RunMirror) -> None:
        self.run = run
        self._dirty = True
        if not self.live:
            self._line(f"run {run.run_id} {run.state.value}")

    def task_changed(self, run: RunMirror, ti: TaskMirror) -> None:
        self.run = run
        self._dirty = True
        if not self.live:
            extra = (
                f" (try {ti.try_number})"
                if ti.state in (TaskState.QUEUED, TaskState.RUNNING)
                else ""
            )
            if ti.state in (TaskState.FAILED, TaskState.UP_FOR_RETRY) and ti.message:
                extra += f": {ti.message}"
            self._line(f"{ti.task_id} {ti.state.value}{extra}")

    def _line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"{stamp} {printable(text)}\n")
        # The lines of one loop turn leave in one write at its end: a flush per line
        # was a write(2) per state change, three a task, on the scheduler's loop.
        if self._flush_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.stream.flush()
            return
        self._flush_due = True
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        self.stream.flush()

    def start(self) -> None:
        if self.live:
            self._task = asyncio.create_task(self._redraw_loop())

    async def stop(self) -> None:
        if self._flush_due:
            self._flush()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._draw()

    async def _redraw_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            if self._dirty:
                self._dirty = False
                self._draw()

    def _draw(self) -> None:
        run = self.run
        if run is None:
            return
        columns = shutil.get_terminal_size((100, 30)).columns
        rows = shutil.get_terminal_size((100, 30)).lines - 4
        counts: dict[TaskState, int] = {}
        for ti in run.tasks.values():
            counts[ti.state] = counts.get(ti.state, 0) + 1
        elapsed = format_duration(time.monotonic() - self._started)
        summary = "  ".join(f"{_MARK[s]} {s.value} {n}" for s, n in sorted(counts.items()))
        lines = [printable(f"{run.dag_id} {run.run_id}  {elapsed}"), summary]
        shown = [run.tasks[t] for t in run.order if t in run.tasks]
        active = [t for t in shown if t.state not in (TaskState.SUCCESS, TaskState.NONE)]
        for ti in shown if len(shown) <= rows else active[:rows]:
            note = f"try {ti.try_number}" if ti.try_number else ""
            if ti.state in (TaskState.FAILED, TaskState.UP_FOR_RETRY) and ti.message:
                note += f"  {printable(ti.message)}"
            task_id = printable(ti.task_id)
            lines.append(f"  {_MARK[ti.state]} {task_id:<30} {ti.state.value:<16} {note}"[:columns])
        out = []
        if self._drawn_lines:
            out.append(f"\x1b[{self._drawn_lines}F")
        out.extend(line + "\x1b[K\n" for line in lines)
        out.append("\x1b[J")
        self.stream.write("".join(out))
        self.stream.flush()
        self._drawn_lines = len(lines)
