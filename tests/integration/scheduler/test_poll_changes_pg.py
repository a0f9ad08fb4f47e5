"""On PostgreSQL the store poll reads only after a change notification (migration
0007's triggers, ``store.change_listener``): an idle poll sends no statement, another
process's write is read once its notification is in, and a lost listener connection
(notifications missed) makes the next poll read everything."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from leoflow.domain.states import TaskState
from leoflow.scheduler.core import Scheduler
from leoflow.store import Store, TaskSeed, change_listener
from leoflow.store.clears import request_clear
from tests.integration.scheduler.conftest import SchedulerFactory, dag
from tests.support.proxy import CuttableProxy
from tests.support.waiting import until

REPO = Path(__file__).resolve().parents[3]
SPEC = dag("dag_id: quiet\ntasks: {a: {command: 'true'}}\n")


@pytest.fixture
async def pg_store(postgres_url: str) -> AsyncIterator[Store]:
    store = await Store.open(postgres_url)
    try:
        assert await store.changes.wait_listening()
        yield store
    finally:
        await store.close()


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def _statements(store: Store) -> Iterator[list[str]]:
    """Every SQL statement the store sends meanwhile (through its pool)."""
    sent: list[str] = []
    engine = store._runner.engine.sync_engine  # type: ignore[union-attr]

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def _marker_moves(store: Store, since: int | None, what: str) -> int:
    """Wait until the store's marker is past ``since``; return it."""
    seen: list[int | None] = [None]

    async def moved() -> bool:
        seen[0] = store.changes.marker()
        return seen[0] is not None and seen[0] != since

    await until(moved, what, timeout=30.0)
    assert seen[0] is not None
    return seen[0]


async def _idle(scheduler: Scheduler, store: Store, live: bool = False) -> None:
    """Poll until a poll reads nothing but (``live``) the live tries' rows: the
    notifications of earlier writes are all in."""

    async def quiet() -> bool:
        with _statements(store) as sent:
            await scheduler._poll.run()
        return [("task_instances" in s) for s in sent] == ([True] if live else [])

    await until(quiet, "an idle poll", timeout=30.0)


async def test_each_followed_table_notifies_and_task_rows_or_rollbacks_do_not(
    pg_store: Store, postgres_url: str
) -> None:
    store = pg_store
    heard: list[str] = []
    ear = await asyncpg.connect(_dsn(postgres_url))
    await ear.add_listener("leoflow_changes", lambda *args: heard.append(args[3]))
    other = await asyncpg.connect(_dsn(postgres_url))
    try:
        first = store.changes.marker()
        assert first is not None
        await store.list_dags()
        assert store.changes.marker() == first  # reads notify nothing
        await store.upsert_dag(
            "quiet", fileloc="q.yaml", spec_json=SPEC.model_dump_json(), spec_hash="h",
            source=None,
        )  # fmt: skip
        run = await store.create_run(
            "quiet", "r1", run_type="manual", logical_date=None, conf={},
            tasks=[TaskSeed("a", "default_pool", 1, 0, 1)], epoch=None,
        )  # fmt: skip
        await request_clear(store, run.pk, "a", downstream=False, by="t", at=1.0)
        # A task instance's writes (tries, heartbeats) notify nothing, nor does a
        # rolled-back write.
        (ti,) = await store.list_task_instances(run_pk=run.pk)
        assert await store.transition_task(ti.pk, TaskState.NONE, TaskState.SCHEDULED, epoch=None)
        tx = other.transaction()
        await tx.start()
        await other.execute(
            "INSERT INTO pools (name, slots, description, updated_at) VALUES ('never', 1, '', 0)"
        )
        await tx.rollback()
        await store.upsert_pool("p", 2)
        assert await store.set_dag_paused("quiet", True)

        async def all_in() -> bool:  # in commit order: the pause is the last one
            return heard.count("dags") == 2

        await until(all_in, "the notifications of every write", timeout=30.0)
        assert heard == ["dags", "dag_runs", "clear_requests", "pools", "dags"]
        await _marker_moves(store, first, "the store's own listener to hear them")
    finally:
        await other.close()
        await ear.close()


async def test_an_idle_poll_sends_nothing_and_another_processs_write_is_read(
    make_scheduler: SchedulerFactory, pg_store: Store, postgres_url: str
) -> None:
    specs = [dag(f"dag_id: d{i}\ntasks: {{a: {{command: 'true'}}}}\n") for i in range(50)]
    scheduler: Scheduler = await make_scheduler(*specs, store_=pg_store)
    await scheduler._poll.run()
    assert len(scheduler.book.dags) == 50
    await _idle(scheduler, pg_store)
    for _ in range(5):
        with _statements(pg_store) as sent:
            await scheduler._poll.run()
        assert sent == []  # no DAG row, no run, no pool: not one statement
    before = pg_store.changes.marker()
    script = textwrap.dedent(
        f"""
        import asyncio
        from leoflow.store import Store, TaskSeed, change_listener

        async def main():
            store = await Store.open({postgres_url!r})
            await store.upsert_pool("wide", 7)
            await store.create_run(
                "d3", "from_elsewhere", run_type="manual", logical_date=None, conf={{}},
                tasks=[TaskSeed("a", "default_pool", 1, 0, 1)], epoch=None,
            )
            await store.close()

        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=REPO)
    assert await asyncio.wait_for(proc.wait(), 120) == 0
    await _marker_moves(pg_store, before, "the other process's notifications")
    with _statements(pg_store) as sent:
        await scheduler._poll.run()
    assert sent  # this poll read
    assert scheduler.book.admission.pool_sizes()["wide"] == 7
    assert [r.run_id for r in scheduler.book.runs.values()] == ["from_elsewhere"]
    await _idle(scheduler, pg_store)


async def _cut_listener_then_write(store: Store, url: str, pool: str) -> None:
    """Cut the listener's connection, then write while nobody listens: that write's
    notification is lost for good."""
    admin = await asyncpg.connect(_dsn(url))
    other = await Store.open(url)
    try:
        cut = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
        )
        assert cut == 1

        async def noticed() -> bool:
            return not store.changes.listening

        await until(noticed, "the listener to see its connection cut", timeout=30.0)
        await other.upsert_pool(pool, 3)
    finally:
        await other.close()
        await admin.close()


async def test_a_lost_listener_reads_everything_then_goes_quiet_again(
    make_scheduler: SchedulerFactory, pg_store: Store, postgres_url: str
) -> None:
    scheduler: Scheduler = await make_scheduler(SPEC, store_=pg_store)
    await scheduler._poll.run()
    await _idle(scheduler, pg_store)
    # Polled while the listener is away: it cannot tell, so the poll reads all.
    await _cut_listener_then_write(pg_store, postgres_url, "missed")
    with _statements(pg_store) as sent:
        await scheduler._poll.run()
    assert sent
    assert scheduler.book.admission.pool_sizes()["missed"] == 3
    assert await pg_store.changes.wait_listening()
    await _idle(scheduler, pg_store)
    # Polled only once it listens again: the marker is a new one, so it reads all.
    await _cut_listener_then_write(pg_store, postgres_url, "missed_too")
    assert await pg_store.changes.wait_listening()
    with _statements(pg_store) as sent:
        await scheduler._poll.run()
    assert sent
    assert scheduler.book.admission.pool_sizes()["missed_too"] == 3
    await _idle(scheduler, pg_store)


async def test_a_listener_cut_off_without_a_word_is_found_by_its_ping(
    make_scheduler: SchedulerFactory, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = make_url(postgres_url)
    socket_dir = url.query.get("host")
    unix = f"{socket_dir}/.s.PGSQL.{url.port or 5432}" if isinstance(socket_dir, str) else None
    proxy = CuttableProxy(url.host or "127.0.0.1", url.port or 5432, unix=unix)
    await proxy.start()
    via_proxy = (
        url.difference_update_query(["host"])
        .set(host="127.0.0.1", port=proxy.port)
        .render_as_string(hide_password=False)
    )
    store = await Store.open(via_proxy)
    try:
        assert await store.changes.wait_listening()
        scheduler: Scheduler = await make_scheduler(SPEC, store_=store)
        await scheduler._poll.run()
        await _idle(scheduler, store)
        monkeypatch.setattr(change_listener, "PING_EVERY", 0.2)
        monkeypatch.setattr(change_listener, "PING_TIMEOUT", 1.0)
        proxy.freeze()  # a half-open socket: no reset, no notification, nothing
        other = await Store.open(postgres_url)
        try:
            await other.upsert_pool("unheard", 4)
        finally:
            await other.close()

        async def found() -> bool:
            store.changes.marker()  # what a poll calls first; it starts the ping
            return not store.changes.listening

        await until(found, "the ping to find the silent connection", timeout=60.0)
        proxy.thaw()
        await scheduler._poll.run()
        assert scheduler.book.admission.pool_sizes()["unheard"] == 4
    finally:
        proxy.thaw()
        await store.close()
        await proxy.stop()


async def test_another_replicas_writes_to_a_live_try_are_read_though_they_notify_nothing(
    make_scheduler: SchedulerFactory, pg_store: Store, postgres_url: str
) -> None:
    scheduler: Scheduler = await make_scheduler(SPEC, store_=pg_store)
    run = await pg_store.create_run(
        "quiet", "live", run_type="manual", logical_date=None, conf={},
        tasks=[TaskSeed("a", "default_pool", 1, 0, 1)], epoch=None,
    )  # fmt: skip
    (ti,) = await pg_store.list_task_instances(run_pk=run.pk)
    assert await pg_store.transition_task(ti.pk, TaskState.NONE, TaskState.SCHEDULED, epoch=None)
    assert await pg_store.transition_task(
        ti.pk, TaskState.SCHEDULED, TaskState.QUEUED, epoch=None, try_number=1
    )
    await scheduler._poll.run()
    assert scheduler.book.by_pk[ti.pk].state is TaskState.QUEUED
    await _idle(scheduler, pg_store, live=True)
    replica = await Store.open(postgres_url)
    try:  # what another replica's agent endpoint writes: the start, then a heartbeat
        assert await replica.transition_task(
            ti.pk, TaskState.QUEUED, TaskState.RUNNING, epoch=None, started_at=5.0
        )
        assert await replica.heartbeat(ti.pk, 1, 1_900_000_000.0)
    finally:
        await replica.close()
    with _statements(pg_store) as sent:
        await scheduler._poll.run()
    assert scheduler.book.by_pk[ti.pk].state is TaskState.RUNNING
    assert scheduler.book.by_pk[ti.pk].heartbeat_at == 1_900_000_000.0
    assert len(sent) == 1 and "task_instances" in sent[0]  # only the live tries' rows
