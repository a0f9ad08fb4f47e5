"""Task log records: each (task instance, try)'s bytes, as numbered chunks.

A chunk records its byte offset in the whole log (``start``), so reading a range
never sums the chunks before it, and the tail row alone gives a log's size.
"""

from __future__ import annotations

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


class LogRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        self._log_tail = (
            sa.select(_log.seq, _log.start, _log.size)
            .where(_log.ti_pk == sa.bindparam("b_ti"), _log.try_number == sa.bindparam("b_try"))
            .order_by(_log.seq.desc())
            .limit(1)
        )
        self._log_insert = sa.insert(log_chunks)
        self._log_lock = sa.text(
            "SELECT pg_advisory_xact_lock(CAST(:k1 AS integer), CAST(:k2 AS integer))"
        )

    async def append_log(self, ti_pk: int, try_number: int, data: bytes) -> None:
        """Append bytes to the log of (task instance, try)."""
        if not data:
            return
        data = bytes(data)
        key = {"b_ti": ti_pk, "b_try": try_number}

        def op(conn: Connection) -> None:
            if not self._sqlite:
                # Appends to one log queue up here (SQLite's BEGIN IMMEDIATE already
                # does), so they do not race for the next seq.
                conn.execute(self._log_lock, {"k1": ti_pk % 2**31, "k2": try_number % 2**31})
            tail = conn.execute(self._log_tail, key).first()
            seq, end = (-1, 0) if tail is None else (int(tail[0]), int(tail[1] + tail[2]))
            conn.execute(self._log_insert, _chunk_rows(ti_pk, try_number, data, seq, end))

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
        key = {"b_ti": ti_pk, "b_try": try_number}

        def op(conn: Connection) -> int:
            tail = conn.execute(self._log_tail, key).first()
            return 0 if tail is None else int(tail[1] + tail[2])

        return await self._read(op)
