"""What a task instance gets of its upstreams' outputs, read from the scheduler's mirror
(the leader) or from the store (a replica answering an agent the leader does not hold)."""

from __future__ import annotations

from leoflow.domain.outputs import inputs_for, inputs_problem, item_of
from leoflow.scheduler.mirror import RunMirror
from leoflow.store import Store


def mirror_inputs(run: RunMirror, task_id: str) -> dict[str, str]:
    task = run.spec.tasks.get(task_id)
    if task is None or not task.depends_on:
        return {}
    found = (run.tasks.get(u) for u in task.depends_on)
    return inputs_for(task.depends_on, {ti.task_id: ti.output for ti in found if ti is not None})


def launch_problem(run: RunMirror, task_id: str) -> str | None:
    """Why the task cannot start with its inputs (too big together), or None."""
    task = run.spec.tasks.get(task_id)
    if task is None or not task.depends_on:
        return None
    found = (run.tasks.get(u) for u in task.depends_on)
    return inputs_problem(ti.output for ti in found if ti is not None)


async def stored_inputs(store: Store, ti_pk: int, upstreams: tuple[str, ...]) -> dict[str, str]:
    if not upstreams:
        return {}
    row = await store.get_task_instance(ti_pk)
    if row is None:
        return {}
    # The DAG names a mapped upstream by its own id; the run holds its items.
    wanted = set(upstreams)
    outputs = {
        ti.task_id: ti.output
        for ti in await store.list_task_instances(run_pk=row.run_pk)
        if ti.task_id in wanted or (item_of(ti.task_id) or ("",))[0] in wanted
    }
    return inputs_for(sorted(outputs), outputs)
