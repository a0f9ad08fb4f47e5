"""Has anything been committed since I last looked? One cheap read that says so.

``marker()`` differs from the last value read iff something was committed meanwhile
(None: "cannot tell", and the caller reads everything). Read it before the reads it
vouches for. Three ways, by database:

- A SQLite file keeps ``PRAGMA data_version`` per connection: it moves whenever
  *another* connection (in this process or any other) commits. The probe reads it
  on a connection of its own that never writes, so every write counts, the store's
  own pooled connections included: the scheduler's writes move it too, which costs
  one full poll after a busy tick and is never wrong. The read is a few
  microseconds and runs on the caller's thread, without the store's worker hop:
  its busy timeout is 0, so it never waits on a lock; a busy or broken database
  answers None.
- An in-memory SQLite database lives in this store's one connection: nobody else
  can write it, so the count of this store's own writes (``wrote``) is the marker.
- PostgreSQL: the count of change notifications (``change_listener``), which cover
  the tables the poll follows but not task instances (``covers_tasks`` is False).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from leoflow.store.engine import _sqlite_is_memory, normalize_url

if TYPE_CHECKING:
    from leoflow.store.change_listener import ChangeListener


class ChangeProbe:
    def __init__(self, url: str) -> None:
        parsed = normalize_url(url)
        sqlite = parsed.get_backend_name() == "sqlite"
        self._memory = sqlite and _sqlite_is_memory(parsed)
        self._path = parsed.database if sqlite and not self._memory else None
        self._conn: sqlite3.Connection | None = None
        self._writes = 0
        self._listener: ChangeListener | None = None
        if not sqlite:
            from leoflow.store.change_listener import ChangeListener

            self._listener = ChangeListener(parsed)

    @property
    def covers_tasks(self) -> bool:
        """Whether an unchanged marker also vouches for task instance rows (on
        PostgreSQL it does not: the poll reads the live tries' rows every time)."""
        return self._listener is None

    @property
    def listening(self) -> bool:
        """False while a PostgreSQL listener is not connected (the marker is None)."""
        return self._listener is None or self._listener.listening

    def wrote(self) -> None:
        """This store committed (or tried to commit) a write."""
        self._writes += 1

    def marker(self) -> int | None:
        """A number that differs from the last one read iff something was committed
        meanwhile (None: this store cannot tell now)."""
        if self._listener is not None:
            return self._listener.marker()
        if self._memory:
            return self._writes
        if self._path is None:
            return None
        try:
            if self._conn is None:
                conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 0")
                self._conn = conn
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            self._close_sqlite()
            return None
        return int(row[0])

    async def wait_listening(self) -> bool:
        """PostgreSQL: start listening now and wait for that attempt (False: it
        failed). The other databases can always tell at once."""
        if self._listener is None:
            return True
        return await self._listener.wait_listening()

    async def close(self) -> None:
        self._close_sqlite()
        if self._listener is not None:
            await self._listener.close()

    def _close_sqlite(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
