"""PostgreSQL reads run outside a transaction: one round trip per statement, not
BEGIN, the statement and COMMIT (a busy scheduler loop waits a turn for each)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg

from leoflow.domain.states import TaskState as T
from leoflow.store import Store, TaskChange

from .helpers import make_run

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[Store]:
    """These are PostgreSQL's: SQLite's reads run without BEGIN already, and its write
    lock is its transaction."""
    opened = await Store.open(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def begun(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The isolation level of every transaction asyncpg is asked to start."""
    started: list[str] = []
    adapted: Any = pg_asyncpg.AsyncAdapt_asyncpg_connection
    start = adapted._start_transaction

    async def counted(self: Any) -> None:
        started.append(str(self.isolation_level))
        await start(self)

    monkeypatch.setattr(adapted, "_start_transaction", counted)
    return started


async def test_reads_begin_no_transaction_and_writes_do(store: Store, begun: list[str]) -> None:
    run = await make_run(store, tasks=2)
    begun.clear()
    tis = await store.list_task_instances(run_pk=run.pk)
    assert await store.get_run(run.pk) is not None
    assert begun == [] or set(begun) == {"autocommit"}
    begun.clear()
    assert await store.transition_tasks([TaskChange(tis[0].pk, T.NONE, T.SCHEDULED)], epoch=None)
    assert begun and "autocommit" not in begun
    # The pool hands the write's connection to a read again, and back, unharmed.
    begun.clear()
    assert (await store.get_task_instance(tis[0].pk)) is not None
    assert set(begun) <= {"autocommit"}
    assert await store.transition_tasks(
        [TaskChange(tis[0].pk, T.SCHEDULED, T.QUEUED, fields={"try_number": 1})], epoch=None
    )
    got = await store.get_task_instance(tis[0].pk)
    assert got is not None and got.state is T.QUEUED


async def test_an_exchange_uses_its_tickets_without_a_transaction(
    store: Store, begun: list[str]
) -> None:
    run = await make_run(store, tasks=1)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    await store.transition_tasks([], epoch=None, tickets=[("h1", ti.pk, 1)], tickets_expire_at=1e12)
    begun.clear()
    uses = await store.consume_tickets(["h1", "h1", "nope"], 1.0)
    assert (uses["h1"].status, uses["nope"].status) == ("ok", "unknown")
    assert set(begun) <= {"autocommit"}
    again = await store.consume_tickets(["h1"], 2.0)
    assert again["h1"].status == "replayed"
