"""Find what a path names, or answer 404 naming what is missing."""

from __future__ import annotations

from collections import OrderedDict

from fastapi import HTTPException

from leoflow.domain.catalogue import parse_spec, spec_hash
from leoflow.domain.dag import DagSpec
from leoflow.store import Store
from leoflow.store.rows import DagRow, RunRow, TaskInstanceRow


def not_found(what: str) -> HTTPException:
    return HTTPException(404, what)


async def dag_or_404(store: Store, dag_id: str) -> DagRow:
    row = await store.get_dag(dag_id)
    if row is None:
        raise not_found(f"no DAG {dag_id!r}")
    return row


# Parsed specs by content: a 300-task spec takes milliseconds to validate, and pages
# such as the UI's "waiting" read every DAG's. Specs are frozen models.
_SPECS: OrderedDict[str, DagSpec] = OrderedDict()
_SPECS_KEPT = 256


def spec_of(row: DagRow) -> DagSpec | None:
    """The stored spec; None if it no longer parses (written by another version)."""
    key = spec_hash(row.spec_json)
    cached = _SPECS.get(key)
    if cached is not None:
        _SPECS.move_to_end(key)
        return cached
    try:
        spec = parse_spec(row.spec_json)
    except ValueError:
        return None
    _SPECS[key] = spec
    while len(_SPECS) > _SPECS_KEPT:
        _SPECS.popitem(last=False)
    return spec


async def run_or_404(store: Store, dag_id: str, run_id: str) -> RunRow:
    run = await store.find_run(dag_id, run_id)
    if run is None:
        raise not_found(f"no run {run_id!r} of DAG {dag_id!r}")
    return run


async def task_or_404(
    store: Store, dag_id: str, run_id: str, task_id: str
) -> tuple[RunRow, TaskInstanceRow, list[TaskInstanceRow]]:
    """The run, the task instance, and all of the run's task instances."""
    run = await run_or_404(store, dag_id, run_id)
    tis = await store.list_task_instances(run_pk=run.pk)
    for ti in tis:
        if ti.task_id == task_id:
            return run, ti, tis
    raise not_found(f"run {run_id!r} of DAG {dag_id!r} has no task {task_id!r}")
