"""SQLite transactions run on the event loop first (``leoflow.store.engine``): a
database locked by another writer sends the call to a thread instead of stalling the
loop, a store used from a second thread's loop still works, and the loop's writes do
not grow the WAL without bound (their checkpoints run on a thread)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy import Connection

from leoflow.store import Store
from leoflow.store.engine import SQLITE_BUSY_TIMEOUT_MS


def _insert(value: int):  # type: ignore[no-untyped-def]
    def op(conn: Connection) -> int:
        conn.exec_driver_sql("INSERT INTO probe (x) VALUES (?)", (value,))
        return value

    return op


def _count(conn: Connection) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM probe").scalar_one())


async def _open(path: Path) -> Store:
    store = await Store.open(f"sqlite:///{path}")
    await store._write(lambda conn: conn.exec_driver_sql("CREATE TABLE probe (x)"), None)
    return store


async def test_a_locked_database_sends_the_write_to_a_thread_and_the_loop_runs_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "leoflow.db"
    store = await _open(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
        other.execute("INSERT INTO probe (x) VALUES (0)")
        write = asyncio.ensure_future(store._write(_insert(1), None))
        started = time.monotonic()
        for _ in range(20):
            await asyncio.sleep(0.01)
        # The loop went on: it did not sit out the busy timeout (15 s) in the write.
        assert time.monotonic() - started < SQLITE_BUSY_TIMEOUT_MS / 1000 / 3
        assert not write.done(), "the write went through a held lock"
        other.execute("COMMIT")
        assert await asyncio.wait_for(write, 60) == 1
        assert await store._read(_count) == 2
    finally:
        other.close()
        await store.close()


async def test_a_store_used_from_another_threads_loop(tmp_path: Path) -> None:
    store = await _open(tmp_path / "leoflow.db")
    try:
        await store._write(_insert(1), None)  # the loop's connection is this thread's

        def elsewhere() -> int:
            async def calls() -> int:
                await store._write(_insert(2), None)
                return await store._read(_count)

            return asyncio.run(calls())

        seen: list[int] = []
        worker = threading.Thread(target=lambda: seen.append(elsewhere()))
        worker.start()
        while worker.is_alive():
            await store._write(_insert(3), None)  # meanwhile, on this loop
            await asyncio.sleep(0)
        worker.join()
        assert seen and seen[0] >= 2
        assert await store._read(_count) >= 3
    finally:
        await store.close()


async def test_the_loops_writes_keep_the_wal_bounded(tmp_path: Path) -> None:
    path = tmp_path / "leoflow.db"
    store = await _open(path)
    try:
        sizes = []
        for value in range(8000):
            await store._write(_insert(value), None)
            if value % 500 == 499:
                await asyncio.sleep(0.05)  # the checkpoint thread's turn
                sizes.append(os.stat(f"{path}-wal").st_size)
        assert await store._read(_count) == 8000
        # Checkpointed: the WAL is used again from its start instead of growing by
        # every write's pages (33 MB here after these 8,000 writes without checkpoints;
        # 1-3 MB with them).
        assert max(sizes) < 10 * 1024 * 1024, sizes
    finally:
        await store.close()
