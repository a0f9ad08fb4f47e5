"""A scheduler on a real SQLite store with real executors, and helpers to drive it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.dag import DagSpec
from leoflow.domain.states import TaskState
from leoflow.executor.subprocess import SubprocessExecutor
from leoflow.scheduler.core import Scheduler, SchedulerConfig
from leoflow.scheduler.mirror import RunMirror, TaskMirror
from leoflow.store import Store


def dag(text: str) -> DagSpec:
    return parse_dag(text, Path("test.yaml"))


class Watch:
    """Records every state change the scheduler makes, and concurrency peaks."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, TaskState, int]] = []
        self.active: dict[int, str] = {}
        self.peak_by_dag: dict[str, int] = {}
        self.peak_by_task_prefix: dict[str, int] = {}
        self.peak = 0

    def attach(self, scheduler: Scheduler) -> None:
        scheduler.on_task_change = self.on_task

    def on_task(self, run: RunMirror, ti: TaskMirror) -> None:
        self.changes.append((ti.task_id, ti.state, ti.try_number))
        if ti.state in (TaskState.QUEUED, TaskState.RUNNING):
            self.active[ti.pk] = run.dag_id
        else:
            self.active.pop(ti.pk, None)
        self.peak = max(self.peak, len(self.active))
        per_dag: dict[str, int] = {}
        for dag_id in self.active.values():
            per_dag[dag_id] = per_dag.get(dag_id, 0) + 1
        for dag_id, count in per_dag.items():
            self.peak_by_dag[dag_id] = max(self.peak_by_dag.get(dag_id, 0), count)

    def states_of(self, task_id: str) -> list[TaskState]:
        return [state for t, state, _ in self.changes if t == task_id]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    try:
        yield s
    finally:
        await s.close()


SchedulerFactory = Callable[..., Any]


@pytest.fixture
async def make_scheduler(store: Store) -> AsyncIterator[SchedulerFactory]:
    made: list[Scheduler] = []

    async def make(
        *dags: DagSpec,
        pools: dict[str, int] | None = None,
        parallelism: int = 32,
        executor: Any = None,
        store_: Store | None = None,
        **config: Any,
    ) -> Scheduler:
        target = store_ or store
        for name, slots in (pools or {}).items():
            await target.upsert_pool(name, slots)
        for spec in dags:
            await target.upsert_dag(
                spec.dag_id,
                fileloc=f"{spec.dag_id}.yaml",
                spec_json=spec.model_dump_json(),
                spec_hash=str(hash(spec.model_dump_json())),
                source=None,
            )
        epoch = await target.take_office(f"test-{len(made)}")
        scheduler = Scheduler(
            target,
            executor or SubprocessExecutor(kill_grace=1.0),
            SchedulerConfig(
                parallelism=parallelism, pools=pools or {}, poll_interval=0.2, **config
            ),
            epoch=epoch,
        )
        scheduler.register_dags({spec.dag_id: spec for spec in dags})
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        await scheduler.stop()


async def run_to_end(scheduler: Scheduler, dag_id: str, timeout: float = 90.0) -> Any:
    row = await scheduler.trigger(dag_id)
    return await asyncio.wait_for(scheduler.wait_run(row.pk), timeout)
