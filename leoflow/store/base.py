"""What every record module of the store stands on: the runner, the fence, the schema check.

``StoreBase`` owns the connection to the database (``engine.create_runner``) and
the two ways in: ``_read(op)`` and ``_write(op, epoch)``, each one transaction.
A fenced write checks the scheduler epoch in that same transaction (``_fence``).
The record modules (``dags``, ``runs``, ``tasks`` …) subclass it and add their
prepared statements by extending ``_build_statements``; ``store.Store`` is the
sum of them.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.store.change_probe import ChangeProbe
from leoflow.store.diskfull import SpaceWait
from leoflow.store.engine import create_runner, normalize_url
from leoflow.store.errors import SchemaNotCurrent, StaleEpoch
from leoflow.store.schema import HEAD_REVISION, VERSION_TABLE, scheduler_epoch

T = TypeVar("T")

# Expanding IN lists are cut to this many values (SQLite's variable limit).
IN_CHUNK = 500
# Key of the PostgreSQL advisory lock that serializes concurrent migrations.
MIGRATION_LOCK_KEY = 0x1E0F_1030


def now() -> float:
    return time.time()


def chunks(values: Sequence[Any], size: int = IN_CHUNK) -> list[Sequence[Any]]:
    return [values[i : i + size] for i in range(0, len(values), size)]


def narrowed(stmt: sa.Select[Any], *conditions: sa.ColumnElement[bool] | None) -> sa.Select[Any]:
    """``stmt`` with each condition that was given (a filter left out is None)."""
    for condition in conditions:
        if condition is not None:
            stmt = stmt.where(condition)
    return stmt


def state_update(table: sa.Table, keys: tuple[str, ...], *where: Any, **values: Any) -> sa.Update:
    """A compare-and-set of a row's state: ``pk = :b_pk AND state = :b_expected`` (and
    ``where``), setting ``state = :b_new``, ``values`` and each of ``keys`` from ``:v_<key>``."""
    columns = table.c
    values["state"] = sa.bindparam("b_new")
    values.update({key: sa.bindparam("v_" + key) for key in keys})
    return (
        sa.update(table)
        .where(columns.pk == sa.bindparam("b_pk"), columns.state == sa.bindparam("b_expected"))
        .where(*where)
        .values(values)
    )


def state_params(
    pk: int, expected: str, new: str, keys: tuple[str, ...], fields: Mapping[str, object]
) -> dict[str, Any]:
    """The parameters of a ``state_update`` statement."""
    params: dict[str, Any] = {"b_pk": pk, "b_expected": expected, "b_new": new}
    params.update({"v_" + key: fields[key] for key in keys})
    return params


class Positional:
    """A statement compiled once to the driver's positional SQL, run through
    ``exec_driver_sql`` with a tuple a row: SQLAlchemy builds a dict of processed
    parameters per row of an executemany (``construct_params``), which was most of a
    tick's commit on SQLite. The same SQL, bind processors and events as
    ``conn.execute``; only for a dialect whose paramstyle is positional."""

    def __init__(
        self,
        stmt: sa.ClauseElement,
        dialect: sa.Dialect,
        column_keys: Sequence[str] | None = None,
    ) -> None:
        """``column_keys``: an INSERT's columns (its rows' keys), as ``compile`` takes them;
        any other parameter is a value of the statement's own (an upsert's ``SET active
        = true``) and is sent as it is there."""
        compiled: Any = stmt.compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if not dialect.positional or compiled.positiontup is None:
            raise ValueError(f"{dialect.name} does not bind parameters by position")
        self.sql: str = compiled.string
        names = list(compiled.positiontup)
        processors = [compiled.binds[name].type.bind_processor(dialect) for name in names]
        own = {}
        if column_keys is not None:
            own = {n: compiled.binds[n].effective_value for n in names if n not in column_keys}
        # A row's values in order come from one C call; only the few with a bind
        # processor (dates on SQLite) then go through Python, by position.
        self._take = _taker(names) if not own else _taker_with(names, own)
        self._process = tuple((i, p) for i, p in enumerate(processors) if p is not None)

    def rows(self, params: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        take, process = self._take, self._process
        if not process:
            return [take(row) for row in params]
        out = []
        for row in params:
            values = list(take(row))
            for index, processor in process:
                values[index] = processor(values[index])
            out.append(tuple(values))
        return out


def _taker(names: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of ``names`` in a mapping, as a tuple (itemgetter of one name gives the
    bare value)."""
    if not names:
        return lambda row: ()
    if len(names) == 1:
        (name,) = names
        return lambda row: (row[name],)
    return operator.itemgetter(*names)


def _taker_with(
    names: Sequence[str], own: Mapping[str, Any]
) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """``_taker``, with the statement's own values for the names in ``own``."""
    return lambda row: tuple(own[n] if n in own else row[n] for n in names)


class Expanded:
    """A statement with one expanding ``IN`` parameter, run on SQLite as the driver's
    SQL: expanded and compiled once per list length (up to ``shapes`` lengths), then
    each call is a tuple of values and ``exec_driver_sql``. Through ``conn.execute``
    every call looked the statement up in the compiled cache by its key and expanded
    the list again, several times the cost of running it (a tick's lock read, the
    agent endpoint's ticket uses). The bind processors are the ones ``conn.execute``
    would apply. Other dialects, and longer lists, take ``conn.execute``."""

    def __init__(
        self, stmt: sa.Select[Any] | sa.Update, expanding: str, *, shapes: int = 64
    ) -> None:
        self.stmt = stmt
        self.expanding = expanding
        self.shapes = shapes
        # length -> (SQL, per placeholder: (where its value comes from, bind processor)):
        # an index in the list, a name in the call's params, or (the statement's own value,)
        self._shapes: dict[int, tuple[str, tuple[tuple[int | str | tuple[Any], Any], ...]]] = {}

    def run(
        self, conn: Connection, params: Mapping[str, Any], items: Sequence[Any]
    ) -> sa.CursorResult[Any]:
        """The statement with ``params`` and the list ``items`` for the expanding one."""
        dialect = conn.dialect
        if dialect.name != "sqlite" or not items or len(items) > self.shapes:
            return conn.execute(self.stmt, {**params, self.expanding: list(items)})
        shape = self._shapes.get(len(items))
        if shape is None:
            shape = self._shapes[len(items)] = self._shape(dialect, params, len(items))
        sql, order = shape
        values = []
        for where, process in order:
            if isinstance(where, int):
                value = items[where]
            elif isinstance(where, str):
                value = params[where]
            else:  # a value the statement itself binds
                value = where[0]
            values.append(value if process is None else process(value))
        return conn.exec_driver_sql(sql, tuple(values))

    def _shape(
        self, dialect: sa.Dialect, params: Mapping[str, Any], length: int
    ) -> tuple[str, tuple[tuple[int | str | tuple[Any], Any], ...]]:
        compiled: Any = self.stmt.compile(dialect=dialect)
        expanded = compiled.construct_expanded_state({**params, self.expanding: [None] * length})
        listed = {f"{self.expanding}_{i}": i - 1 for i in range(1, length + 1)}
        order: list[tuple[int | str | tuple[Any], Any]] = []
        for name in expanded.positiontup:
            if name in listed:
                where: int | str | tuple[Any] = listed[name]
            elif name in params:
                where = name
            else:
                where = (expanded.parameters[name],)
            order.append((where, expanded.processors.get(name)))
        return expanded.statement, tuple(order)


def check_fields(fields: Mapping[str, object], allowed: frozenset[str], what: str) -> None:
    unknown = set(fields) - allowed
    if unknown:
        raise TypeError(f"{what} cannot set {sorted(unknown)}; settable: {sorted(allowed)}")


def _disk_of(url: str) -> str:
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ":memory:"
        return f"the disk holding {Path(database).expanduser().resolve()}"
    return f"the PostgreSQL server's disk ({parsed.host or 'local'}/{parsed.database or ''})"


class StoreBase:
    """The connection, the fence and the schema check; no records of its own."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._runner = create_runner(url)
        self._sqlite = self._runner.dialect == "sqlite"
        self.space = SpaceWait(_disk_of(url))
        # Whether anything was committed since the last look (the scheduler's poll).
        self.changes = ChangeProbe(url)
        self._build_statements()

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True) -> Self:
        """Connect, and bring the schema to head (``migrate``) or insist it is there."""
        store = cls(url)
        try:
            await store._ensure_schema(migrate)
        except BaseException:
            await store.close()
            raise
        return store

    @classmethod
    async def upgrade(cls, url: str) -> str:
        """``leoflow db upgrade``: migrate the database to head; return the revision."""
        store = await cls.open(url, migrate=True)
        try:
            return await store.schema_revision() or ""
        finally:
            await store.close()

    async def close(self) -> None:
        self.space.closed = True
        await self.changes.close()
        await self._runner.close()

    @property
    def url(self) -> str:
        return self._url

    @property
    def retry_window(self) -> float:
        """How long a call waits out a database that does not answer (StoreUnavailable after)."""
        return self._runner.retry_window

    @retry_window.setter
    def retry_window(self, seconds: float) -> None:
        self._runner.retry_window = seconds

    @property
    def dialect(self) -> Literal["sqlite", "postgresql"]:
        return "sqlite" if self._sqlite else "postgresql"

    # ------------------------------------------------------------------ the two ways in

    async def _write(
        self, op: Callable[[Connection], T], epoch: int | None, *, urgent: bool = False
    ) -> T:
        # A full disk makes the write wait for space rather than fail (see diskfull).
        try:
            return await self.space.write(
                lambda: self._runner.run(
                    op, write=True, epoch=epoch, fence=self._fence, urgent=urgent
                )
            )
        finally:
            self.changes.wrote()  # after the commit, so a marker read before it differs

    async def _read(self, op: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """``urgent``: the lease's calls, which must not wait behind other traffic."""
        return await self._runner.run(op, write=False, epoch=None, fence=self._fence, urgent=urgent)

    def _fence(self, conn: Connection, epoch: int) -> None:
        current = int(conn.execute(self._epoch_fence).scalar_one())
        if current != epoch:
            raise StaleEpoch(epoch, current)

    def _insert_many(
        self, conn: Connection, stmt: sa.Insert, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """An executemany INSERT of rows that all have the same keys; on SQLite as
        ``Positional`` SQL, kept per statement and set of keys."""
        if not self._sqlite or not rows:
            conn.execute(stmt, list(rows))
            return
        keys = tuple(rows[0])
        positional = self._inserts.get((stmt, keys))
        if positional is None:
            positional = Positional(stmt, conn.dialect, keys)
            self._inserts[(stmt, keys)] = positional
        conn.exec_driver_sql(positional.sql, positional.rows(rows))

    def _insert_one(
        self, conn: Connection, stmt: sa.Insert, row: Mapping[str, Any]
    ) -> sa.CursorResult[Any]:
        """One row's INSERT as ``Positional`` SQL, kept per statement and set of keys.
        The dialects' own INSERT (``_insert``: ON CONFLICT) has no cache key in
        SQLAlchemy 2.0, so ``conn.execute`` compiled it again every time: ~0.1 ms of CPU
        a run made."""
        keys = tuple(row)
        positional = self._inserts.get((stmt, keys))
        if positional is None:
            positional = Positional(stmt, conn.dialect, keys)
            self._inserts[(stmt, keys)] = positional
        return conn.exec_driver_sql(positional.sql, positional.rows([row])[0])

    def _insert(self, table: sa.Table) -> Any:
        """The dialect's INSERT, which has ``on_conflict_do_update``/``_do_nothing``."""
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)

    def _build_statements(self) -> None:
        """Prepare statements once per store; each record module extends this."""
        fence = sa.select(scheduler_epoch.c.epoch).where(scheduler_epoch.c.id == 1)
        self._epoch_fence = fence if self._sqlite else fence.with_for_update(read=True)
        self._epoch_read = fence
        self._inserts: dict[tuple[sa.Insert, tuple[str, ...]], Positional] = {}

    # ------------------------------------------------------------------ schema

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at; None if it has no schema yet."""
        return await self._read(self._schema_revision)

    def _schema_revision(self, conn: Connection) -> str | None:
        if self._sqlite:
            exists = conn.exec_driver_sql(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)
            ).first()
        else:
            exists = conn.exec_driver_sql(f"SELECT to_regclass('{VERSION_TABLE}')").scalar()
        if not exists:
            return None
        version = conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").scalar()
        return None if version is None else str(version)

    async def _ensure_schema(self, migrate: bool) -> None:
        current = await self.schema_revision()
        if current == HEAD_REVISION:
            return
        if not migrate:
            raise SchemaNotCurrent(
                f"database schema is at {current or 'nothing'}, this Leoflow needs "
                f"{HEAD_REVISION}: run `leoflow db upgrade`"
            )
        # Alembic is imported only here: a database at head never pays for it.
        from leoflow.store import migrate as migrations

        def op(conn: Connection) -> None:
            # The write transaction (BEGIN IMMEDIATE / the advisory lock) makes a
            # second process opening the same database wait, then find it at head.
            if not self._sqlite:
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            migrations.upgrade(conn)

        await self._write(op, None)
