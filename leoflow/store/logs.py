"""Task log records: each (task instance, try)'s bytes, as numbered chunks.

A chunk records its byte offset in the whole log (``start``), so reading a range
never sums the chunks before it, and the tail row alone gives a log's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from leoflow.store.base import StoreBase
from leoflow.store.schema import log_chunks

LOG_CHUNK_BYTES = 256 * 1024
_LOG_APPEND_ATTEMPTS = 5

_log = log_chunks.c


def _chunk_rows(ti_pk: int, try_number: int, data: bytes, seq: int, end: int) -> list[Any]:
    """``data`` as chunk rows continuing a log whose last chunk is ``seq``, ending at ``end``."""
    rows = []
    for offset in range(0, len(data), LOG_CHUNK_BYTES):
        piece = data[offset : offset + LOG_CHUNK_BYTES]
        seq += 1
        rows.append(
            {
                "ti_pk": ti_pk,
                "try_number": try_number,
                "seq": seq,
                "start": end,
                "size": len(piece),
                "data": piece,
            }
        )
        end += len(piece)
    return rows


_TAIL = (
    sa.select(_log.seq, _log.start, _log.size)
    .where(_log.ti_pk == sa.bindparam("b_ti"), _log.try_number == sa.bindparam("b_try"))
    .order_by(_log.seq.desc())
    .limit(1)
)
_INSERT = sa.insert(log_chunks)
_LOCK = sa.text("SELECT pg_advisory_xact_lock(CAST(:k1 AS integer), CAST(:k2 AS integer))")

LogEntry = tuple[int, int, bytes]  # task instance, try, the bytes to append to its log


def write_log_rows(conn: Connection, entries: Sequence[LogEntry], *, sqlite: bool) -> None:
    """Append each entry's bytes to its try's log, in order, within ``conn``'s
    transaction: one tail read per log and one insert for them all."""
    tails: dict[tuple[int, int], tuple[int, int]] = {}
    rows: list[Any] = []
    for ti_pk, try_number, data in entries:
        if not data:
            continue
        key = (ti_pk, try_number)
        if key not in tails:
            if not sqlite:
                # Appends to one log queue up here (SQLite's BEGIN IMMEDIATE already
                # does), so they do not race for the next seq.
                conn.execute(_LOCK, {"k1": ti_pk % 2**31, "k2": try_number % 2**31})
            tail = conn.execute(_TAIL, {"b_ti": ti_pk, "b_try": try_number}).first()
            tails[key] = (-1, 0) if tail is None else (int(tail[0]), int(tail[1] + tail[2]))
        seq, end = tails[key]
        added = _chunk_rows(ti_pk, try_number, bytes(data), seq, end)
        tails[key] = (added[-1]["seq"], added[-1]["start"] + added[-1]["size"])
        rows.extend(added)
    if rows:
        conn.execute(_INSERT, rows)


class LogRecords(StoreBase):
    async def append_log(self, ti_pk: int, try_number: int, data: bytes) -> None:
        """Append bytes to the log of (task instance, try)."""
        await self.append_logs([(ti_pk, try_number, data)])

    async def append_logs(self, entries: Sequence[LogEntry]) -> None:
        """Append to several logs (or one, several times) in one transaction, in order."""
        if not any(data for _, _, data in entries):
            return

        def op(conn: Connection) -> None:
            write_log_rows(conn, entries, sqlite=self._sqlite)

        for attempt in range(_LOG_APPEND_ATTEMPTS):
            try:
                await self._write(op, None)
                return
            except IntegrityError:
                # A concurrent append took the same seq (PostgreSQL): read the tail again.
                if attempt == _LOG_APPEND_ATTEMPTS - 1:
                    raise

    async def read_log(
        self, ti_pk: int, try_number: int, *, offset: int = 0, limit: int | None = None
    ) -> bytes:
        """Bytes [offset, offset+limit) of the log (to its end if limit is None)."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError("offset and limit must not be negative")
        if limit == 0:
            return b""
        stmt = (
            sa.select(_log.start, _log.data)
            .where(
                _log.ti_pk == ti_pk,
                _log.try_number == try_number,
                _log.start + _log.size > offset,
            )
            .order_by(_log.seq)
        )
        if limit is not None:
            stmt = stmt.where(_log.start < offset + limit)

        def op(conn: Connection) -> bytes:
            rows = conn.execute(stmt).all()
            if not rows:
                return b""
            begin = offset - int(rows[0][0])
            joined = b"".join(bytes(r[1]) for r in rows)
            return joined[begin:] if limit is None else joined[begin : begin + limit]

        return await self._read(op)

    async def log_size(self, ti_pk: int, try_number: int) -> int:
        return (await self.log_sizes([(ti_pk, try_number)]))[(ti_pk, try_number)]

    async def log_sizes(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
        """Each (task instance, try)'s log size, read in one transaction."""

        def op(conn: Connection) -> dict[tuple[int, int], int]:
            sizes = {}
            for ti_pk, try_number in keys:
                tail = conn.execute(_TAIL, {"b_ti": ti_pk, "b_try": try_number}).first()
                sizes[(ti_pk, try_number)] = 0 if tail is None else int(tail[1] + tail[2])
            return sizes

        return await self._read(op)
