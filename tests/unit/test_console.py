"""The console's tables show what DAGs and tasks say without letting them drive the terminal."""

from __future__ import annotations

import asyncio
import io
from typing import cast

from leoflow.commands.console import Progress
from leoflow.commands.tables import table
from leoflow.domain.states import TaskState
from leoflow.scheduler.mirror import RunMirror, TaskMirror


def test_a_table_cell_cannot_move_the_cursor() -> None:
    shown = table(["task", "reason"], [["t\x1b[1A", "boom\r\nfake row"]])
    assert "\x1b" not in shown and "\r" not in shown
    assert shown.splitlines()[1] == "t\\x1b[1A  boom\\x0d\\x0afake row"


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def _task(task_id: str, state: TaskState) -> TaskMirror:
    return TaskMirror(
        pk=1,
        run_pk=1,
        task_id=task_id,
        state=state,
        try_number=1,
        max_tries=1,
        pool="default",
        pool_slots=1,
        priority=1,
    )


async def test_state_lines_of_one_loop_turn_leave_in_one_flush_and_none_is_lost() -> None:
    stream = _CountingStream()
    progress = Progress(stream, live=False)
    run = cast(RunMirror, object())
    for i in range(5):
        progress.task_changed(run, _task(f"t{i}", TaskState.RUNNING))
    assert stream.flushes == 0  # not one write(2) a line, on the scheduler's loop
    await asyncio.sleep(0)
    assert stream.flushes == 1
    progress.task_changed(run, _task("last", TaskState.SUCCESS))
    await progress.stop()  # what is still waiting for its turn's end leaves at the stop
    assert stream.flushes == 2
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        *(f"t{i} running (try 1)" for i in range(5)),
        "last success",
    ]


def test_outside_a_loop_each_line_is_flushed_at_once() -> None:
    stream = _CountingStream()
    Progress(stream, live=False).task_changed(
        cast(RunMirror, object()), _task("a", TaskState.FAILED)
    )
    assert stream.flushes == 1 and stream.getvalue().endswith("a failed\n")
