"""What the routes that change a run's task instances (clear, mark, clear failed) share:
the refusal of a queued run (one 409, one wording), and the run's own graph (which
"why is it waiting" reads too)."""

from __future__ import annotations

from fastapi import HTTPException

from leoflow.api.lookup import spec_of
from leoflow.domain.dag import DagSpec
from leoflow.domain.mapping import with_items
from leoflow.domain.states import RunState
from leoflow.store import Store
from leoflow.store.rows import RunRow, TaskInstanceRow


def refuse_if_queued(run: RunRow, done: str) -> None:
    """409 for a queued run: none of its tasks has run, so there is nothing to change.
    ``done`` is what the route would have done ("cleared", "marked")."""
    if run.state is RunState.QUEUED:
        raise HTTPException(
            409, f"run {run.run_id!r} is queued: none of its tasks has run yet; nothing was {done}"
        )


async def run_graph(store: Store, dag_id: str, tis: list[TaskInstanceRow]) -> DagSpec | None:
    """The run's own graph: a mapped task's items in place of it, as tasks with their
    retries (``leoflow/domain/mapping.py``); None when the DAG is gone or its stored
    spec no longer parses."""
    dag = await store.get_dag(dag_id)
    found = spec_of(dag) if dag is not None else None
    return with_items(found, tis) if found is not None else None
