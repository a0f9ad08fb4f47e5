"""How the store reaches its database: one transaction per call, run in one go.

Every store call is a synchronous function over a SQLAlchemy Core ``Connection``,
run as a whole transaction:

- PostgreSQL: on an async engine (asyncpg) through ``AsyncConnection.run_sync``.
- SQLite: on a sync engine (the stdlib driver). A transaction first runs on the event
  loop itself, on a connection of its own whose busy timeout is zero: SQLite answers
  in tens of microseconds, less than the hop to a thread and back costs, and the GIL
  made the thread run one at a time with the loop anyway. If the database is locked
  (another process or one of our threads is writing) it fails at once, rolls back,
  and runs again in a small worker-thread pool that waits on the busy timeout, so the
  loop never waits for a lock. (The aiosqlite adapter cost a thread hop per cursor(),
  execute(), fetchall(), close(), begin and commit: ~1 ms for one fenced write.)

SQLite connections run in WAL mode with synchronous=NORMAL, a busy timeout and
foreign keys on; write transactions start with BEGIN IMMEDIATE, so writers queue on
the busy timeout instead of failing when a read lock would have to be upgraded.

A database that is briefly gone (PostgreSQL restarting or failing over, a SQLite
"database is locked" storm past the busy timeout) does not fail the call: the whole
transaction runs again with capped exponential backoff and jitter for up to
``retry_window`` seconds, then StoreUnavailable. Running it again is safe: a
transaction that broke was rolled back, and one whose COMMIT went through but whose
answer was lost replays compare-and-set writes that now find their row changed and
report a lost race, which the scheduler reconciles by reloading. Every fenced write
checks the epoch inside its own transaction, retried or not, so none lands under a
stale epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

from leoflow.aio import stages
from leoflow.store.errors import StoreError, StoreUnavailable

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 15_000
SQLITE_THREADS = 4
# The loop's connection checkpoints nothing itself; every this many of its writes a
# thread does (SQLite's own default is every 1000 pages of WAL, a write being 1-4 pages).
_CHECKPOINT_EVERY = 250
_CHECKPOINT_WAIT_MS = 50
# How long a store call waits out a database that does not answer (seconds).
RETRY_WINDOW = 60.0
_RETRY_FIRST, _RETRY_CAP = 0.1, 2.0

log = logging.getLogger("leoflow.store")

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


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take BEGIN out of the driver's hands: writes issue BEGIN IMMEDIATE themselves.
    dbapi_connection.isolation_level = None
    # SQLite keeps whatever bytes a writer gave it; a row written straight into the file
    # with bytes that are not UTF-8 would otherwise fail every query that reads it (a
    # whole listing). It reads with U+FFFD in their place instead: shown, and marked.
    dbapi_connection.text_factory = _lenient_text
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


_ASYNCPG_GONE = frozenset(
    {
        "CannotConnectNowError",
        "ConnectionDoesNotExistError",
        "AdminShutdownError",
        "ConnectionFailureError",
        "InterfaceError",
    }
)


def transient(exc: BaseException) -> bool:
    """The database did not answer, or cannot now: worth running the transaction again."""
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated or isinstance(exc, sa.exc.InterfaceError):
            return True
        if isinstance(exc, sa.exc.OperationalError):
            text = str(exc.orig).lower()
            # SQLite: locked/busy. PostgreSQL: every OperationalError is about the
            # server's state (shutting down, starting up, connection lost, deadlock).
            return "sqlite" not in type(exc.orig).__module__ or "locked" in text or "busy" in text
        return False
    if isinstance(exc, (OSError, ConnectionError, TimeoutError)):
        return True
    return type(exc).__module__.startswith("asyncpg") and type(exc).__name__ in _ASYNCPG_GONE


async def _retrying(call: Callable[[], Any], window: float, what: str) -> Any:
    started = time.monotonic()
    delay = _RETRY_FIRST
    while True:
        try:
            return await call()
        except Exception as exc:
            if not transient(exc):
                raise
            waited = time.monotonic() - started
            if waited >= window:
                raise StoreUnavailable(
                    f"the {what} database did not answer for {waited:.0f}s (the store's "
                    f"retry window is {window:g}s): {type(exc).__name__}: {exc}"
                ) from exc
            pause = min(delay, window - waited) * random.uniform(0.5, 1.0)
            log.warning("the %s database: %s; trying again in %.1fs", what, exc, pause)
            await asyncio.sleep(pause)
            delay = min(delay * 2, _RETRY_CAP)


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

    # No pre_ping: it cost a round trip on every checkout, that is on every store call.
    # After a restart the pooled connections are dead; the first call on one fails as
    # a disconnect, which invalidates the whole pool, and ``_retrying`` runs that
    # transaction again on a fresh connection (tests/integration/kube/test_db_restart.py).
    return create_async_engine(url, pool_size=5, max_overflow=10)


class Runner(Protocol):
    dialect: str
    retry_window: float

    async def run(
        self,
        op: Callable[[Connection], T],
        *,
        write: bool,
        epoch: int | None,
        fence: Fence,
        urgent: bool = False,
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
    stages.mark("transaction", int(write))  # a store round trip (the stage trace)
    return result


class SqliteRunner:
    dialect = "sqlite"

    def __init__(self, url: URL) -> None:
        self.engine = create_sqlite_engine(url)
        # One connection (StaticPool) for an in-memory database: one thread too, and
        # no loop-side connection (it would be that same connection).
        memory = _sqlite_is_memory(url)
        self._inline_ok = not memory
        self._inline: Connection | None = None
        self._inline_thread = 0  # the loop's thread: the connection is that thread's only
        self._inline_writes = 0
        threads = 1 if memory else SQLITE_THREADS
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="leoflow-store")
        # The lease's own thread (on one of the pool's overflow connections): a renewal
        # queued behind a backlog of log and state writes on a loaded machine could
        # miss its deadline and make the holder step down. It still takes its turn at
        # SQLite's write lock, but behind one transaction, not the whole queue.
        self._urgent = (
            self._executor
            if memory
            else ThreadPoolExecutor(1, thread_name_prefix="leoflow-store-lease")
        )
        self.retry_window = RETRY_WINDOW

    def _call(
        self, op: Callable[[Connection], T], write: bool, epoch: int | None, fence: Fence
    ) -> T:
        with self.engine.connect() as conn:
            return _transaction(conn, op, write, epoch, fence, "BEGIN IMMEDIATE" if write else None)

    def _on_loop(
        self, op: Callable[[Connection], T], write: bool, epoch: int | None, fence: Fence
    ) -> tuple[bool, T | None]:
        """(True, the result), or (False, None) when the database was locked or the
        loop's connection broke: nothing was written, the caller takes the thread path."""
        conn = self._inline
        if conn is None:
            conn = self._inline = self.engine.connect()
            self._inline_thread = threading.get_ident()
            # Checkpoints write the database file and may fsync it: the threads do them.
            conn.exec_driver_sql("PRAGMA busy_timeout = 0")
            conn.exec_driver_sql("PRAGMA wal_autocheckpoint = 0")
        elif self._inline_thread != threading.get_ident():
            return False, None  # a store shared with another thread's loop
        try:
            result = _transaction(
                conn, op, write, epoch, fence, "BEGIN IMMEDIATE" if write else None
            )
        except sa.exc.SQLAlchemyError as exc:
            # A database error may leave the connection invalid or mid-rollback (a full
            # disk does): the next call gets a fresh one. (An op's own exceptions, such
            # as a lost race, were rolled back cleanly and keep it.)
            self._drop_inline()
            if isinstance(exc, sa.exc.DBAPIError) and transient(exc):
                return False, None
            raise
        if write:
            self._inline_writes += 1
            if self._inline_writes % _CHECKPOINT_EVERY == 0:
                self._executor.submit(self._checkpoint)
        return True, result

    def _checkpoint(self) -> None:
        # RESTART, not PASSIVE: the loop goes on writing while this runs, so a passive
        # checkpoint always leaves the newest frames behind and the WAL, never wholly
        # copied, is never started over (it grew by every write). RESTART holds the
        # write lock while it copies; the loop's writes meanwhile find it locked and go
        # to the threads, which wait; the next write then starts the WAL from its start.
        # While it waits for readers it holds writers off too, so it waits briefly: a
        # long reader (another process) makes it give up until the next turn.
        with contextlib.suppress(Exception), self.engine.connect() as conn:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
            try:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(RESTART)")
            finally:
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")

    def _drop_inline(self) -> None:
        conn, self._inline = self._inline, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()  # its busy timeout of 0 must not go back to the pool
                conn.close()

    async def run(
        self,
        op: Callable[[Connection], T],
        *,
        write: bool,
        epoch: int | None,
        fence: Fence,
        urgent: bool = False,
    ) -> T:
        if self._inline_ok and not urgent:
            done, value = self._on_loop(op, write, epoch, fence)
            if done:
                return value  # type: ignore[return-value]  # done: op's own result
        loop = asyncio.get_running_loop()
        executor = self._urgent if urgent else self._executor

        async def once() -> T:
            return await loop.run_in_executor(executor, self._call, op, write, epoch, fence)

        result: T = await _retrying(once, self.retry_window, "SQLite")
        return result

    async def close(self) -> None:
        self._inline_ok = False
        self._drop_inline()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown, True)
        if self._urgent is not self._executor:
            await loop.run_in_executor(None, self._urgent.shutdown, True)
        self.engine.dispose()


class PostgresRunner:
    dialect = "postgresql"

    def __init__(self, url: URL) -> None:
        self.engine = create_postgres_engine(url)
        self.retry_window = RETRY_WINDOW

    async def run(
        self,
        op: Callable[[Connection], T],
        *,
        write: bool,
        epoch: int | None,
        fence: Fence,
        urgent: bool = False,  # no queue of ours to jump: the pool serves in turn
    ) -> T:
        async def once() -> T:
            async with self.engine.connect() as conn:
                return await conn.run_sync(_transaction, op, write, epoch, fence, None)

        result: T = await _retrying(once, self.retry_window, "PostgreSQL")
        return result

    async def close(self) -> None:
        await self.engine.dispose()


def create_runner(url: str) -> SqliteRunner | PostgresRunner:
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        return SqliteRunner(parsed)
    return PostgresRunner(parsed)
