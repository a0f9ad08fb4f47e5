"""Small builders shared by the store tests."""

from __future__ import annotations

from leoflow.store import RunRow, Store, TaskSeed


def seeds(count: int, *, pool: str = "default_pool") -> list[TaskSeed]:
    return [TaskSeed(f"t{i:04d}", pool, 1, i % 7, 3) for i in range(count)]


async def make_run(
    store: Store,
    *,
    dag_id: str = "dag",
    run_id: str = "run",
    tasks: int = 3,
    epoch: int | None = None,
    run_type: str = "manual",
    logical_date: float | None = None,
) -> RunRow:
    return await store.create_run(
        dag_id,
        run_id,
        run_type=run_type,
        logical_date=logical_date,
        conf={"k": [1, 2]},
        tasks=seeds(tasks),
        epoch=epoch,
    )
