"""Clearing a finished run from above a mapped task reaches its items: the closure and
the retries come from the run's own graph (items, not the placeholder the DAG names)."""

from __future__ import annotations

import httpx

from leoflow.domain.states import RunState, TaskState
from leoflow.store import Store
from leoflow.store.mapping import expand_task
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import auth_header, put_dag
from tests.integration.api.seed import move

DAG = """
dag_id: m
tasks:
  start: {command: "true"}
  each:
    depends_on: [start]
    map_over: {output: start}
    retries: 2
    command: "true"
  after:
    depends_on: [each]
    command: "true"
  aside: {command: "true"}
"""
DONE = (TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCESS)


async def test_clear_with_downstream_from_above_a_mapped_task_clears_its_items(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, DAG)
    seeds = [TaskSeed(t, "default_pool", 1, 0, 3 if t == "each" else 1) for t in
             ("start", "each", "after", "aside")]  # fmt: skip
    run = await store.create_run(
        "m", "r", run_type="manual", logical_date=None, conf={}, tasks=seeds, epoch=None
    )
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    assert await expand_task(store, tis["each"].pk, run, seeds[1], ['"a"', '"b"'], epoch=None)
    for ti in await store.list_task_instances(run_pk=run.pk):
        await move(store, ti.pk, *DONE)
    await store.transition_run(run.pk, RunState.RUNNING, RunState.SUCCESS, epoch=None)

    r = await client.post(
        "/api/v1/dags/m/runs/r/tasks/start/clear?downstream=true", headers=auth_header("operator")
    )
    assert r.status_code == 200, r.text
    assert sorted(r.json()["cleared"]) == ["after", "each[0]", "each[1]", "start"]
    after = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    assert after["aside"].state is TaskState.SUCCESS  # not below start
    for item in ("each[0]", "each[1]"):
        # Its retries anew (retries: 2 -> three more tries), not the one try a task
        # missing from the DAG's own graph would get.
        assert (after[item].state, after[item].max_tries) == (TaskState.NONE, 1 + 3)
