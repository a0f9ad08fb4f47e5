"""The store waits out a database that is briefly gone: a SQLite "database is locked"
storm past the busy timeout, and (in tests/integration/kube/test_db_restart.py) a
PostgreSQL restart. Past its retry window it says so, naming the window."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from leoflow.store import Store, StoreUnavailable
from leoflow.store import engine as store_engine


async def hold_exclusive_lock(path: Path, seconds: float, locked: asyncio.Event) -> None:
    """Another process's writer that keeps the database locked for ``seconds``."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        locked.set()
        await asyncio.sleep(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    # A short busy timeout, so the storm outlasts it and the retries are what helps.
    monkeypatch.setattr(store_engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    return await Store.open(f"sqlite:///{tmp_path / 'leoflow.db'}")


async def test_a_locked_storm_past_the_busy_timeout_is_waited_out(
    sqlite_store: Store, tmp_path: Path
) -> None:
    locked = asyncio.Event()
    holder = asyncio.create_task(hold_exclusive_lock(tmp_path / "leoflow.db", 2.0, locked))
    try:
        await locked.wait()
        await sqlite_store.upsert_pool("etl", 4)  # blocked ~2 s: 20 busy timeouts
        assert {p.name: p.slots for p in await sqlite_store.list_pools()}["etl"] == 4
    finally:
        await holder
        await sqlite_store.close()


async def test_a_storm_longer_than_the_window_is_store_unavailable(
    sqlite_store: Store, tmp_path: Path
) -> None:
    sqlite_store.retry_window = 0.5
    locked = asyncio.Event()
    holder = asyncio.create_task(hold_exclusive_lock(tmp_path / "leoflow.db", 2.0, locked))
    try:
        await locked.wait()
        with pytest.raises(StoreUnavailable, match=r"retry window is 0\.5s.*locked"):
            await sqlite_store.upsert_pool("etl", 4)
    finally:
        await holder
        await sqlite_store.close()
