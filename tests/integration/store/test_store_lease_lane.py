"""The lease's calls do not queue behind other store traffic (SQLite): with every
store thread busy and more calls waiting (calls go to the threads when the database
was locked when the loop tried them), a renewal still reads and writes the lease, so a
loaded Lite does not miss its renew deadline and step down."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import Connection

from leoflow.store import Store
from leoflow.store.engine import SQLITE_THREADS


async def test_a_lease_renewal_jumps_a_store_backlog(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    gate = threading.Event()
    entered = threading.Semaphore(0)

    loop_thread = threading.get_ident()

    def blocked(conn: Connection) -> int:
        if threading.get_ident() == loop_thread:
            # As a call that found the database locked on the loop: it goes to a thread.
            locked = sqlite3.OperationalError("database is locked")
            raise sa.exc.OperationalError("BEGIN IMMEDIATE", {}, locked)
        entered.release()
        if not gate.wait(120):
            raise TimeoutError("never released")
        return 1

    # Every store thread held, and a queue behind them.
    backlog = [asyncio.ensure_future(store._read(blocked)) for _ in range(SQLITE_THREADS * 3)]
    try:
        for _ in range(SQLITE_THREADS):
            assert await asyncio.to_thread(entered.acquire, True, 60)
        row = await asyncio.wait_for(store.get_lease(), 60)
        renewed = dataclasses.replace(row, holder="me", renew_time=1.0)
        written = await asyncio.wait_for(store.write_lease(row.version, renewed), 60)
        assert written is not None and written.version == row.version + 1
        assert not any(f.done() for f in backlog), "the backlog was not held"
    finally:
        gate.set()
        assert await asyncio.gather(*backlog) == [1] * len(backlog)
        await store.close()
    reopened = await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")
    try:
        assert (await reopened.get_lease()).holder == "me"
    finally:
        await reopened.close()
