"""PostgreSQL: has anything the poll follows been committed since I last looked?

Migration 0007 puts a row trigger on the tables the scheduler's poll reads for
other writers' changes (DAGs, pools, runs, backfills and their points, clear
requests): each written row runs ``pg_notify('leoflow_changes', <table>)``. This
listener holds one connection of its own (not the store's pool) that LISTENs on
that channel and counts what arrives. ``marker()`` is that count, or None
("cannot tell": not listening yet, or the connection was lost), and the poll
reads the store only when it differs from the one taken before its last full read.

Why NOTIFY, weighed against the other ways of knowing:

- A change-counter row bumped by every writer: every writing transaction holds
  that one row's lock until it commits, so writers from the API and several
  scheduler replicas queue on it.
- ``pg_snapshot_xmax`` (or ``txid_current``): moves with every transaction that
  writes anything, the lease renewal included, so it is never still.
- A ``seq`` column filled from a sequence, read ``WHERE seq > last``: a sequence
  is not transactional, so a writer that took N can commit after N+1 was read;
  bounding that takes a lag window (wrong under a slow transaction) or comparing
  snapshots' in-progress xids, which every writing transaction in the cluster
  enters. And it needs a column, an index and a read per table.
- NOTIFY is transactional: a notification is delivered only if, and after, its
  transaction commits and is visible to new snapshots; aborted writes send none.
  So, with the count read *before* the reads it vouches for: a notification
  counted before that read is for a commit those reads see; one counted after
  changes the next marker. Either way nothing is missed, whatever the number of
  writers or replicas, and a writer holds no row lock for it.

What it costs and what it cannot see:

- A notifying commit takes PostgreSQL's notification queue lock for its commit, so
  the triggers stay off the tables written at task rate (task instances,
  heartbeats, log chunks, tickets, the lease). The poll reads the live tries' rows
  itself every time (``covers_tasks`` is False), as it did before.
- A lost connection loses the notifications sent meanwhile: the marker is None
  until the connection is back and LISTENing again, and the first marker after
  that is new, so the poll after a reconnect reads everything. A connection that
  died without a word (a half-open socket) is found by a ``SELECT 1`` every
  ``PING_EVERY`` seconds; those seconds bound how late such a change is seen.
- LISTEN needs a session of its own: through a pooler in transaction mode it
  never hears anything; connect directly (or in session mode). If LISTEN fails
  the marker stays None and every poll reads everything, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.engine import URL

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger("leoflow.store")

CHANNEL = "leoflow_changes"  # migration 0007's triggers notify this
PING_EVERY = 10.0
PING_TIMEOUT = 5.0
CONNECT_TIMEOUT = 10.0
_BACKOFF_FIRST, _BACKOFF_CAP = 0.5, 30.0
_ADAPTER_ONLY = (
    "async_fallback",
    "async_creator_fn",
    "prepared_statement_cache_size",
    "prepared_statement_name_func",
)


class ChangeListener:
    """The notification count of one LISTENing connection; see the module docstring."""

    def __init__(self, url: URL) -> None:
        # The engine's own translation of the URL (host, port, ssl ...) for asyncpg.
        dialect = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
        _, kwargs = dialect.create_connect_args(url)  # type: ignore[no-untyped-call]
        for adapter_only in _ADAPTER_ONLY:  # SQLAlchemy's adapter takes these, not asyncpg
            kwargs.pop(adapter_only, None)
        self._connect_kwargs: dict[str, Any] = kwargs
        self._conn: asyncpg.Connection | None = None
        self._count = 0
        self._listening = False
        self._task: asyncio.Task[None] | None = None
        self._checked_at = 0.0
        self._retry_at = 0.0
        self._backoff = _BACKOFF_FIRST
        self._closed = False
        self._warned = False

    @property
    def listening(self) -> bool:
        return self._listening

    def marker(self) -> int | None:
        """A number that differs from the last one read iff a change was committed
        meanwhile (None: cannot tell). Starts the connection the first time, and
        checks it every ``PING_EVERY`` seconds, in the background."""
        if self._closed:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        conn = self._conn
        if conn is not None and conn.is_closed():  # before its termination callback ran
            self._lose(conn)
        now = time.monotonic()
        if self._task is None:
            if not self._listening and now >= self._retry_at:
                self._task = loop.create_task(self._connect())
            elif self._listening and now - self._checked_at >= PING_EVERY:
                self._task = loop.create_task(self._ping())
        return self._count if self._listening else None

    async def wait_listening(self) -> bool:
        """Start listening now (unless it does, or waits out a failure) and wait for
        that attempt; True if listening."""
        self.marker()
        task = self._task
        if task is not None:
            await asyncio.shield(task)
        return self._listening

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        conn, self._conn = self._conn, None
        self._listening = False
        if conn is not None:
            try:
                await conn.close(timeout=PING_TIMEOUT)
            except Exception:
                conn.terminate()

    # ------------------------------------------------------------------ background

    async def _connect(self) -> None:
        import asyncpg

        made: list[asyncpg.Connection] = []
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                conn = await asyncpg.connect(**self._connect_kwargs)
            made.append(conn)
            conn.add_termination_listener(self._terminated)
            await conn.add_listener(CHANNEL, self._notified)
        except BaseException as exc:
            for conn in made:
                conn.terminate()
            if not isinstance(exc, Exception):
                raise  # cancelled: the store is closing
            self._failed(exc)
            return
        finally:
            self._task = None
        if self._closed:
            conn.terminate()
            return
        self._conn = conn
        self._count += 1  # a new marker: what was sent while not listening is read now
        self._listening = True
        self._checked_at = time.monotonic()
        self._backoff = _BACKOFF_FIRST
        if self._warned:
            log.info("change listener: listening again")
        self._warned = False

    def _failed(self, exc: Exception) -> None:
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, _BACKOFF_CAP)
        if not self._warned:  # once per outage; every poll reads everything meanwhile
            self._warned = True
            log.warning("change listener: cannot LISTEN (%s); every poll reads all", exc)

    async def _ping(self) -> None:
        conn = self._conn
        try:
            if conn is not None:
                async with asyncio.timeout(PING_TIMEOUT):
                    await conn.fetchval("SELECT 1")
                self._checked_at = time.monotonic()
        except Exception as exc:
            log.warning("change listener: the connection does not answer (%s)", exc)
            if conn is not None:
                self._lose(conn)
                conn.terminate()
        finally:
            self._task = None

    def _notified(self, _conn: Any, _pid: int, _channel: str, _payload: str) -> None:
        self._count += 1

    def _terminated(self, conn: Any) -> None:
        self._lose(conn)

    def _lose(self, conn: Any) -> None:
        if conn is self._conn:
            self._conn = None
            self._listening = False
            self._retry_at = time.monotonic()
