"""Small builders shared by the store tests."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.sql.compiler import SQLCompiler

from leoflow.store import RunRow, Store, TaskSeed


def compiled_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement SQLAlchemy compiles from now on (a statement it
    found in its cache, or that the store keeps compiled, is not in it)."""
    compiled: list[str] = []
    original = SQLCompiler.__init__

    def counting(self: SQLCompiler, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        compiled.append(self.string)

    monkeypatch.setattr(SQLCompiler, "__init__", counting)
    return compiled


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


async def issue_ticket(
    store: Store, ticket_hash: str, ti_pk: int, try_number: int, expires_at: float
) -> None:
    """A ticket written the way the scheduler writes it: with a tick's batch."""
    await store.transition_tasks(
        [], epoch=None, tickets=[(ticket_hash, ti_pk, try_number)], tickets_expire_at=expires_at
    )
