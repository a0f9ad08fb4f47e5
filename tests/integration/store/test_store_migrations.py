from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from leoflow.store import SchemaNotCurrent, Store
from leoflow.store import migrate as migrations
from leoflow.store.engine import SqliteRunner
from leoflow.store.schema import HEAD_REVISION, metadata

REPO = Path(__file__).resolve().parents[3]


def test_head_revision_constant_matches_the_scripts() -> None:
    assert migrations.head_revision() == HEAD_REVISION


async def test_migrate_empty_to_head_matches_the_metadata(store_url: str) -> None:
    with pytest.raises(SchemaNotCurrent, match="leoflow db upgrade"):
        await Store.open(store_url, migrate=False)
    assert await Store.upgrade(store_url) == HEAD_REVISION
    store = await Store.open(store_url, migrate=False)
    try:
        assert await store.schema_revision() == HEAD_REVISION
        assert await store.current_epoch() == 0

        def diff(conn: Connection) -> list[object]:
            return list(compare_metadata(MigrationContext.configure(conn), metadata))

        assert await store._read(diff) == []

        # Down to nothing and back up again.
        def down(conn: Connection) -> None:
            migrations.downgrade(conn, "base")

        await store._write(down, None)
        assert await store.schema_revision() is None
        assert await store._read(diff) != []
    finally:
        await store.close()
    reopened = await Store.open(store_url)
    try:
        assert await reopened.schema_revision() == HEAD_REVISION
        assert await reopened.take_office("x") == 1
    finally:
        await reopened.close()


async def test_reopen_keeps_data(store_url: str) -> None:
    store = await Store.open(store_url)
    await store.upsert_pool("p", 3)
    await store.close()
    store = await Store.open(store_url)
    try:
        assert [p.name for p in await store.list_pools()] == ["p"]
    finally:
        await store.close()


async def test_sqlite_pragmas_and_directory(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "leoflow.db"
    store = await Store.open(f"sqlite+aiosqlite:///{path}")
    try:
        assert store.dialect == "sqlite"

        def pragmas(conn: Connection) -> tuple[object, ...]:
            return tuple(
                conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            )

        # On the loop's own connection (busy timeout 0: a lock sends the call to a
        # thread) and on a thread's, which waits out a lock.
        journal, synchronous, foreign_keys, busy = await store._read(pragmas)
        assert (journal, synchronous, foreign_keys, busy) == ("wal", 1, 1, 0)
        runner = store._runner
        assert isinstance(runner, SqliteRunner)
        journal, synchronous, foreign_keys, busy = await asyncio.to_thread(
            runner._call, pragmas, False, None, lambda conn, epoch: None
        )
        assert (journal, synchronous, foreign_keys) == ("wal", 1, 1)
        assert isinstance(busy, int) and busy >= 1000
    finally:
        await store.close()
    assert path.exists()


async def test_two_processes_open_one_sqlite_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    script = textwrap.dedent(
        f"""
        import asyncio
        from leoflow.domain.states import TaskState
        from leoflow.store import Store, TaskSeed, TaskChange

        async def main(name):
            store = await Store.open({f"sqlite:///{db}"!r})
            epoch = await store.take_office(name)
            for i in range(20):
                run = await store.create_run(
                    "dag", f"{{name}}-{{i}}", run_type="manual", logical_date=None, conf={{}},
                    tasks=[TaskSeed(f"t{{j}}", "p", 1, 0, 1) for j in range(10)], epoch=None,
                )
                tis = await store.list_task_instances(run_pk=run.pk)
                await store.transition_tasks(
                    [TaskChange(t.pk, TaskState.NONE, TaskState.SCHEDULED) for t in tis],
                    epoch=None,
                )
            await store.close()

        import sys
        asyncio.run(main(sys.argv[1]))
        """
    )
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", script, name, cwd=REPO)
        for name in ("a", "b")
    ]
    codes = [await proc.wait() for proc in procs]
    assert codes == [0, 0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM dag_runs").fetchone() == (40,)
        assert conn.execute(
            "SELECT count(*) FROM task_instances WHERE state = 'scheduled'"
        ).fetchone() == (400,)
        assert conn.execute("SELECT epoch FROM scheduler_epoch").fetchone() == (2,)
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
