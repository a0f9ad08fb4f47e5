"""A full disk under the store: a write waits for space instead of failing.

SQLite answers SQLITE_FULL ("database or disk is full") when the filesystem holding
the database or its WAL has no room; PostgreSQL answers SQLSTATE 53100 (disk_full).
Either way the transaction rolled back, nothing was written, and the very same write
succeeds once there is space again. So the store retries it, for as long as it
takes, and every writer waits where it is: the scheduler loop commits nothing and so
starts no task; a task's output waits in the agent's log stream, which pauses the
command's pipes rather than dropping a byte. One log line says which disk is full and
what to do when the waiting begins, and one when a write gets through again.

Before this, the first failed write crashed the scheduler loop (Lite exited with a
SQLAlchemy traceback) and a refused log append made the agent drop the rest of the
task's output while the task went on to succeed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from leoflow.store.errors import StoreError

T = TypeVar("T")

log = logging.getLogger("leoflow.store")

# Between attempts while the disk is full: soon enough that work resumes within about
# a second of space coming back, rare enough to cost nothing while it waits.
RETRY_FIRST = 0.1
RETRY_MAX = 1.0
_PG_DISK_FULL = "53100"


class StoreFull(StoreError):
    """The store's disk is full and the store is closing, so the write is given up."""


def disk_full_detail(exc: BaseException) -> str | None:
    """The driver's own words when ``exc`` says the disk is full; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.Error) and (
            getattr(current, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        ):
            return str(current)
        if getattr(current, "sqlstate", None) == _PG_DISK_FULL:
            return str(current).splitlines()[0] if str(current) else "disk full"
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return None


class SpaceWait:
    """Retries writes that failed for want of disk space; announces the wait once."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.full_since: float | None = None
        self.closed = False
        self.waited = 0  # writes that had to wait, for tests and metrics

    def message(self, detail: str) -> str:
        return (
            f"{self.where} is full ({detail}): no new task starts and task output is held "
            "until it can be written; free space there (or move the database to a larger "
            "disk) and Leoflow resumes by itself, losing nothing"
        )

    async def write(self, attempt: Callable[[], Awaitable[T]]) -> T:
        delay = RETRY_FIRST
        waited = False
        while True:
            try:
                result = await attempt()
            except Exception as exc:
                detail = disk_full_detail(exc)
                if detail is None:
                    raise
                if self.closed:
                    raise StoreFull(self.message(detail)) from None
                if not waited:
                    waited = True
                    self.waited += 1
                if self.full_since is None:
                    self.full_since = time.monotonic()
                    log.error("%s", self.message(detail))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            if self.full_since is not None:
                held = time.monotonic() - self.full_since
                self.full_since = None
                log.warning(
                    "%s has space again after %.0fs: writing and starting tasks again",
                    self.where,
                    held,
                )
            return result
