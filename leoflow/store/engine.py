"""How the store reaches its database: one transaction per call, run in one go.

Every store call is a synchronous function over a SQLAlchemy Core ``Connection``,
run as a whole transaction:

- PostgreSQL: on an async engine (asyncpg) through ``AsyncConnection.run_sync``.
- SQLite: on a sync engine (the stdlib driver) in a small worker-thread pool. The
  aiosqlite adapter costs a thread hop per cursor(), execute(), fetchall(), close(),
  begin and commit (about 10 hops, ~1 ms, for one fenced compare-and-set); here the
  whole transaction is one hop. The event loop never blocks on the database either way.

SQLite connections run in WAL mode with synchronous=NORMAL, a busy timeout and
foreign keys on; write transactions start with BEGIN IMMEDIATE, so writers queue on
the busy timeout instead of failing when a read lock would have to be upgraded.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

from leoflow.store.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 15_000
SQLITE_THREADS = 4

Fence = Callable[[Connection, int], None]


def normalize_url(url: str) -> URL:
    """``sqlite:///path`` / ``postgresql://...`` with the driver this store uses."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    raise StoreError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql://")


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take BEGIN out of the driver's hands: writes issue BEGIN IMMEDIATE themselves.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    _use_wal(cursor)
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the file to WAL (a persistent, once-per-file change).

    Switching needs the file to itself and does not wait on the busy timeout,
    so a second process opening a brand-new database while the first creates
    it got "database is locked". Once the file is WAL there is nothing to do.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_is_memory(url: URL) -> bool:
    database = url.database or ""
    return database in ("", ":memory:") or "mode=memory" in database


def create_sqlite_engine(url: URL) -> sa.Engine:
    connect_args = {"check_same_thread": False}
    if _sqlite_is_memory(url):
        engine = sa.create_engine(url, poolclass=StaticPool, connect_args=connect_args)
    else:
        assert url.database is not None
        Path(url.database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url, pool_size=SQLITE_THREADS, max_overflow=2, connect_args=connect_args
        )
    event.listen(engine, "connect", _sqlite_on_connect)
    return engine


def create_postgres_engine(url: URL) -> AsyncEngine:
    from sqlalchemy.ext.asyncio import create_async_engine

    return create_async_engine(url, pool_size=5, max_overflow=10)


class Runner(Protocol):
    dialect: str

    async def run(
        self, op: Callable[[Connection], T], *, write: bool, epoch: int | None, fence: Fence
    ) -> T: ...

    async def close(self) -> None: ...


def _transaction(
    conn: Connection,
    op: Callable[[Connection], T],
    write: bool,
    epoch: int | None,
    fence: Fence,
    begin: str | None,
) -> T:
    if begin is not None:
        conn.exec_driver_sql(begin)
    try:
        if epoch is not None:
            fence(conn, epoch)
        result = op(conn)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
    return result


class SqliteRunner:
    dialect = "sqlite"

    def __init__(self, url: URL) -> None:
        self.engine = create_sqlite_engine(url)
        # One connection (StaticPool) for an in-memory database: one thread too.
        threads = 1 if _sqlite_is_memory(url) else SQLITE_THREADS
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="leoflow-store")

    def _call(
        self, op: Callable[[Connection], T], write: bool, epoch: int | None, fence: Fence
    ) -> T:
        with self.engine.connect() as conn:
            return _transaction(conn, op, write, epoch, fence, "BEGIN IMMEDIATE" if write else None)

    async def run(
        self, op: Callable[[Connection], T], *, write: bool, epoch: int | None, fence: Fence
    ) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, op, write, epoch, fence)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown, True)
        self.engine.dispose()


class PostgresRunner:
    dialect = "postgresql"

    def __init__(self, url: URL) -> None:
        self.engine = create_postgres_engine(url)

    async def run(
        self, op: Callable[[Connection], T], *, write: bool, epoch: int | None, fence: Fence
    ) -> T:
        async with self.engine.connect() as conn:
            return await conn.run_sync(_transaction, op, write, epoch, fence, None)

    async def close(self) -> None:
        await self.engine.dispose()


def create_runner(url: str) -> SqliteRunner | PostgresRunner:
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        return SqliteRunner(parsed)
    return PostgresRunner(parsed)
