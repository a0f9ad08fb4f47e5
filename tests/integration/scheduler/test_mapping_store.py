"""A mapped task's expansion in the store, and its items as a scheduler replica that is
not the leader answers their agents (from the store alone): each item's Start carries
its LEOFLOW_MAP_ITEM, and a downstream's Start carries the items' outputs as one list."""

from __future__ import annotations

from pathlib import Path

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import TaskState
from leoflow.runtime.dagfolder import record_dag
from leoflow.scheduler.agent_backend import TaskSession
from leoflow.scheduler.agent_service import SchedulerBackend
from leoflow.secrets.directory import DirectorySecrets
from leoflow.store import Store
from leoflow.store.mapping import expand_task
from leoflow.store.rows import TaskSeed

DAG = """
dag_id: m
tasks:
  each:
    map_over: [a, b]
    env: {KEEP: me}
    command: "true"
  after:
    depends_on: [each]
    command: "true"
"""


async def _queued(store: Store, pk: int) -> None:
    assert await store.transition_task(pk, TaskState.NONE, TaskState.SCHEDULED, epoch=None)
    assert await store.transition_task(
        pk, TaskState.SCHEDULED, TaskState.QUEUED, epoch=None, try_number=1
    )


async def test_items_replace_their_placeholder_and_a_replica_starts_them(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        spec = parse_dag(DAG, tmp_path / "dag.yaml")
        await record_dag(store, LoadedDag(spec, tmp_path / "dag.yaml", DAG))
        seeds = [TaskSeed(t, "default_pool", 1, 0, 1) for t in ("each", "after")]
        run = await store.create_run(
            "m", "r1", run_type="manual", logical_date=None, conf={}, tasks=seeds, epoch=None
        )
        tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
        placeholder = tis["each"]
        assert await expand_task(store, placeholder.pk, run, seeds[0], ['"a"', '"b"'], epoch=None)
        # A second expansion finds no placeholder and writes nothing.
        assert not await expand_task(store, placeholder.pk, run, seeds[0], ['"x"'], epoch=None)
        tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
        assert set(tis) == {"each[0]", "each[1]", "after"}
        assert (tis["each[1]"].map_item, tis["each[1]"].state) == ('"b"', TaskState.NONE)

        backend = SchedulerBackend(lambda: None, store, DirectorySecrets(tmp_path))
        item = tis["each[1]"]
        await _queued(store, item.pk)
        started = await backend.start(
            TaskSession(item.pk, 1, "m", "r1", "each[1]", ()), executor_ref="pod:x"
        )
        assert started.env["LEOFLOW_MAP_ITEM"] == '"b"'
        assert started.env["LEOFLOW_MAP_INDEX"] == "1"
        assert started.env["KEEP"] == "me" and started.env["LEOFLOW_TASK_ID"] == "each[1]"

        first = tis["each[0]"].pk
        await _queued(store, first)
        assert await store.transition_task(first, TaskState.QUEUED, TaskState.RUNNING, epoch=None)
        for pk, text in ((first, '{"n": 0}'), (item.pk, None)):
            assert await store.transition_task(
                pk, TaskState.RUNNING, TaskState.SUCCESS, epoch=None, output=text
            )
        after = tis["after"]
        await _queued(store, after.pk)
        started = await backend.start(
            TaskSession(after.pk, 1, "m", "r1", "after", ()), executor_ref="pod:y"
        )
        assert started.inputs == {"each": '[{"n": 0},null]'}
    finally:
        await store.close()
