"""Has anything been committed since I last looked? One cheap read that says so.

SQLite keeps ``PRAGMA data_version`` per connection: it moves whenever *another*
connection (in this process or any other) commits. The probe reads it on a
connection of its own that never writes, so every write counts, the store's own
pooled connections included: the scheduler's writes move it too, which costs one
full poll after a busy tick and is never wrong.

The read is a few microseconds and runs on the caller's thread, without the
store's worker hop: its busy timeout is 0, so it never waits on a lock; a busy
or broken database answers None, "cannot tell", and the caller reads everything.

PostgreSQL has no such number here, and an in-memory SQLite database cannot be
opened from a second connection: for both ``marker`` is always None.
"""

from __future__ import annotations

import sqlite3

from leoflow.store.engine import _sqlite_is_memory, normalize_url


class ChangeProbe:
    def __init__(self, url: str) -> None:
        parsed = normalize_url(url)
        sqlite = parsed.get_backend_name() == "sqlite"
        self._path = parsed.database if sqlite and not _sqlite_is_memory(parsed) else None
        self._conn: sqlite3.Connection | None = None

    @property
    def can_tell(self) -> bool:
        return self._path is not None

    def marker(self) -> int | None:
        """A number that differs from the last one read iff something was committed
        meanwhile (None: this store cannot tell)."""
        if self._path is None:
            return None
        try:
            if self._conn is None:
                conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout = 0")
                self._conn = conn
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            self.close()
            return None
        return int(row[0])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
