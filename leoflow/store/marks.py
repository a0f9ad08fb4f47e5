"""Marking a finished run's tasks success or failed (a running run's marks are the
scheduler's: ``leoflow/scheduler/clears.py``). The marked tasks take their state,
the tasks below them that a trigger rule decided go back to ``none``, and the run
goes back to running: the scheduler runs what is left and ends the run again by
its tasks' states, as after a clear."""

from __future__ import annotations

from collections.abc import Sequence

from leoflow.domain.marking import marked_fields, reopened_fields
from leoflow.domain.states import TaskState
from leoflow.store.clears import ClearLost, write_and_restart
from leoflow.store.rows import RunRow, TaskChange, TaskInstanceRow
from leoflow.store.store import Store


async def mark_finished_run(
    store: Store,
    run: RunRow,
    tis: Sequence[TaskInstanceRow],
    names: Sequence[str],
    reopen: Sequence[str],
    *,
    state: TaskState,
    target: str,
    by: str,
    at: float,
    epoch: int | None,
) -> list[str]:
    """Mark ``names`` ``state`` (the ones not in it already) and reopen ``reopen``;
    the tasks changed, marked first. Raises ClearLost if ``target`` changed meanwhile
    or the run did, and if there is nothing to change."""
    by_id = {ti.task_id: ti for ti in tis}
    marked = [by_id[n] for n in names if n in by_id and by_id[n].state is not state]
    if target not in {ti.task_id for ti in marked}:
        current = by_id[target].state.value if target in by_id else "gone"
        raise ClearLost(f"task {target!r} is {current} already; nothing was marked")
    # The target first: its change losing a race means the page was out of date.
    marked.sort(key=lambda ti: ti.task_id != target)
    changes = [
        TaskChange(
            ti.pk, ti.state, state, ti.try_number, marked_fields(state, by, at, stopped=False)
        )
        for ti in marked
    ]
    again = [by_id[n] for n in reopen if n in by_id]
    changes += [
        TaskChange(ti.pk, ti.state, TaskState.NONE, ti.try_number, reopened_fields(by))
        for ti in again
    ]
    return await write_and_restart(
        store,
        run,
        changes,
        [ti.task_id for ti in marked + again],
        target=target,
        what=f"marked {state.value} by {by}",
        epoch=epoch,
    )
