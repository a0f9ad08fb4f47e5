"""The state store: SQLAlchemy Core over SQLite (Lite, tests) or PostgreSQL (Pro).

Every state change is a compare-and-set (``UPDATE ... WHERE state = :expected``),
so a lost race shows as ``False``, never as a silent overwrite. A scheduler's writes
carry its fencing epoch; the check and the write share one transaction, and the
epoch row is locked FOR SHARE (PostgreSQL) or the whole database is write-locked
(SQLite, ``BEGIN IMMEDIATE``), so ``take_office`` cannot slip in between.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from leoflow.domain.catalogue import DagVersion
from leoflow.domain.states import (
    RunState,
    TaskState,
    check_run_transition,
    check_task_transition,
)
from leoflow.store.diskfull import SpaceWait
from leoflow.store.engine import create_runner, normalize_url
from leoflow.store.errors import RunExists, SchemaNotCurrent, StaleEpoch, StoreError
from leoflow.store.rows import (
    DagRow,
    LeaseRow,
    PoolRow,
    RunRow,
    TaskChange,
    TaskInstanceRow,
    TaskSeed,
    TicketUse,
)
from leoflow.store.schema import (
    HEAD_REVISION,
    VERSION_TABLE,
    dag_import_errors,
    dag_runs,
    dags,
    log_chunks,
    pools,
    scheduler_epoch,
    scheduler_lease,
    task_instances,
    tickets,
)

T = TypeVar("T")

TASK_FIELDS = frozenset(
    {
        "try_number",
        "ready_at",
        "queued_at",
        "started_at",
        "ended_at",
        "next_retry_at",
        "heartbeat_at",
        "exit_code",
        "reason",
        "message",
        "executor_ref",
        "max_tries",
    }
)
RUN_FIELDS = frozenset({"started_at", "ended_at", "message"})
# manual: triggered; scheduled: cron; local: created and driven by one `leoflow run` process.
RUN_TYPES = ("manual", "scheduled", "local")

LOG_CHUNK_BYTES = 256 * 1024
# Expanding IN lists are cut to this many values (SQLite's variable limit).
IN_CHUNK = 500
# Key of the PostgreSQL advisory lock that serializes concurrent migrations.
MIGRATION_LOCK_KEY = 0x1E0F_1030
_LOG_APPEND_ATTEMPTS = 5

_ti = task_instances.c
_run = dag_runs.c
_log = log_chunks.c


def _disk_of(url: str) -> str:
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ":memory:"
        return f"the disk holding {Path(database).expanduser().resolve()}"
    return f"the PostgreSQL server's disk ({parsed.host or 'local'}/{parsed.database or ''})"


def _now() -> float:
    return time.time()


def _chunks(values: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [values[i : i + size] for i in range(0, len(values), size)]


def _run_row(r: Sequence[Any]) -> RunRow:
    return RunRow(
        r[0], r[1], r[2], RunState(r[3]), r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], r[10]
    )


def _ti_row(r: Sequence[Any]) -> TaskInstanceRow:
    return TaskInstanceRow(
        r[0], r[1], r[2], r[3], r[4], TaskState(r[5]), r[6], r[7], r[8], r[9], r[10], r[11],
        r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20], r[21],
    )  # fmt: skip


def _dag_row(r: Sequence[Any]) -> DagRow:
    return DagRow(r[0], r[1], r[2], r[3], r[4], bool(r[5]), bool(r[6]), r[7], r[8])


def _check_fields(fields: Mapping[str, object], allowed: frozenset[str], what: str) -> None:
    unknown = set(fields) - allowed
    if unknown:
        raise TypeError(f"{what} cannot set {sorted(unknown)}; settable: {sorted(allowed)}")


class Store:
    """The state store. Open with ``await Store.open(url)``; close when done."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._runner = create_runner(url)
        self._sqlite = self._runner.dialect == "sqlite"
        self.space = SpaceWait(_disk_of(url))
        self._ti_update_cache: dict[tuple[tuple[str, ...], bool], sa.Update] = {}
        self._run_update_cache: dict[tuple[str, ...], sa.Update] = {}
        self._build_statements()

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True) -> Store:
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

    async def _write(self, op: Callable[[Connection], T], epoch: int | None) -> T:
        # A full disk makes the write wait for space rather than fail (see diskfull).
        return await self.space.write(
            lambda: self._runner.run(op, write=True, epoch=epoch, fence=self._fence)
        )

    async def _read(self, op: Callable[[Connection], T]) -> T:
        return await self._runner.run(op, write=False, epoch=None, fence=self._fence)

    def _fence(self, conn: Connection, epoch: int) -> None:
        current = int(conn.execute(self._epoch_fence).scalar_one())
        if current != epoch:
            raise StaleEpoch(epoch, current)

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

    def _insert(self, table: sa.Table) -> Any:
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)

    def _build_statements(self) -> None:
        fence = sa.select(scheduler_epoch.c.epoch).where(scheduler_epoch.c.id == 1)
        self._epoch_fence = fence if self._sqlite else fence.with_for_update(read=True)
        self._epoch_read = fence
        self._take_office = (
            sa.update(scheduler_epoch)
            .where(scheduler_epoch.c.id == 1)
            .values(
                epoch=scheduler_epoch.c.epoch + 1,
                holder=sa.bindparam("b_holder"),
                updated_at=sa.bindparam("b_now"),
            )
            .returning(scheduler_epoch.c.epoch)
        )

        ins = self._insert(dags)
        self._upsert_dag = ins.on_conflict_do_update(
            index_elements=[dags.c.dag_id],
            set_={
                "fileloc": ins.excluded.fileloc,
                "spec_json": ins.excluded.spec_json,
                "spec_hash": ins.excluded.spec_hash,
                "source": ins.excluded.source,
                "active": True,
                "updated_at": ins.excluded.updated_at,
            },
            where=sa.or_(
                dags.c.spec_hash != ins.excluded.spec_hash,
                dags.c.fileloc != ins.excluded.fileloc,
                dags.c.source.is_distinct_from(ins.excluded.source),
                sa.not_(dags.c.active),
            ),
        ).returning(dags.c.dag_id)
        self._dag_select = sa.select(
            dags.c.dag_id,
            dags.c.fileloc,
            dags.c.spec_json,
            dags.c.spec_hash,
            dags.c.source,
            dags.c.paused,
            dags.c.active,
            dags.c.updated_at,
            dag_import_errors.c.error,
        ).select_from(
            dags.outerjoin(dag_import_errors, dag_import_errors.c.fileloc == dags.c.fileloc)
        )
        self._dag_fingerprint = sa.select(
            sa.func.count(),
            sa.func.sum(dags.c.updated_at),
            sa.func.sum(sa.case((dags.c.paused, 1), else_=0)),
            sa.func.sum(sa.case((dags.c.active, 1), else_=0)),
        ).select_from(dags)
        self._dag_versions = sa.select(
            dags.c.dag_id, dags.c.spec_hash, dags.c.paused, dags.c.active
        ).order_by(dags.c.dag_id)
        ins = self._insert(dag_import_errors)
        self._upsert_dag_error = ins.on_conflict_do_update(
            index_elements=[dag_import_errors.c.fileloc],
            set_={"error": ins.excluded.error, "updated_at": ins.excluded.updated_at},
        )

        ins = self._insert(dag_runs)
        self._insert_run = ins.on_conflict_do_nothing(
            index_elements=[dag_runs.c.dag_id, dag_runs.c.run_id]
        ).returning(dag_runs.c.pk)
        self._insert_tis = sa.insert(task_instances)
        self._run_by_pk = sa.select(dag_runs).where(_run.pk == sa.bindparam("b_pk"))
        self._run_by_id = sa.select(dag_runs).where(
            _run.dag_id == sa.bindparam("b_dag_id"), _run.run_id == sa.bindparam("b_run_id")
        )
        self._last_scheduled = (
            sa.select(dag_runs)
            .where(
                _run.dag_id == sa.bindparam("b_dag_id"),
                _run.run_type == "scheduled",
                _run.logical_date.is_not(None),
            )
            .order_by(_run.logical_date.desc(), _run.pk.desc())
            .limit(1)
        )

        self._ti_by_pk = sa.select(task_instances).where(_ti.pk == sa.bindparam("b_pk"))
        self._ti_by_pks = sa.select(task_instances).where(
            _ti.pk.in_(sa.bindparam("b_pks", expanding=True))
        )
        lock = (
            sa.select(_ti.pk, _ti.state, _ti.try_number)
            .where(_ti.pk.in_(sa.bindparam("b_pks", expanding=True)))
            .order_by(_ti.pk)
        )
        # Rows are locked in pk order, so two batches cannot deadlock each other.
        self._ti_lock = lock if self._sqlite else lock.with_for_update()
        self._heartbeat = (
            sa.update(task_instances)
            .where(
                _ti.pk == sa.bindparam("b_pk"),
                _ti.state == TaskState.RUNNING.value,
                _ti.try_number == sa.bindparam("b_try"),
            )
            .values(heartbeat_at=sa.bindparam("b_at"))
        )

        ins = self._insert(pools)
        self._upsert_pool = ins.on_conflict_do_update(
            index_elements=[pools.c.name],
            set_={
                "slots": ins.excluded.slots,
                "description": ins.excluded.description,
                "updated_at": ins.excluded.updated_at,
            },
        )

        self._insert_ticket = sa.insert(tickets)
        self._consume_ticket = (
            sa.update(tickets)
            .where(
                tickets.c.hash == sa.bindparam("b_hash"),
                tickets.c.used_at.is_(None),
                tickets.c.expires_at > sa.bindparam("b_now"),
            )
            .values(used_at=sa.bindparam("b_now"))
            .returning(tickets.c.ti_pk, tickets.c.try_number)
        )
        self._ticket_by_hash = sa.select(
            tickets.c.ti_pk, tickets.c.try_number, tickets.c.used_at
        ).where(tickets.c.hash == sa.bindparam("b_hash"))

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

    def _ti_update(self, keys: tuple[str, ...], with_try: bool) -> sa.Update:
        stmt = self._ti_update_cache.get((keys, with_try))
        if stmt is None:
            stmt = sa.update(task_instances).where(
                _ti.pk == sa.bindparam("b_pk"), _ti.state == sa.bindparam("b_expected")
            )
            if with_try:
                stmt = stmt.where(_ti.try_number == sa.bindparam("b_try"))
            values: dict[str, Any] = {
                "state": sa.bindparam("b_new"),
                "updated_at": sa.bindparam("b_now"),
            }
            values.update({key: sa.bindparam("v_" + key) for key in keys})
            stmt = stmt.values(values)
            self._ti_update_cache[(keys, with_try)] = stmt
        return stmt

    def _run_update(self, keys: tuple[str, ...]) -> sa.Update:
        stmt = self._run_update_cache.get(keys)
        if stmt is None:
            values: dict[str, Any] = {"state": sa.bindparam("b_new")}
            values.update({key: sa.bindparam("v_" + key) for key in keys})
            stmt = (
                sa.update(dag_runs)
                .where(_run.pk == sa.bindparam("b_pk"), _run.state == sa.bindparam("b_expected"))
                .values(values)
            )
            self._run_update_cache[keys] = stmt
        return stmt

    # ------------------------------------------------------------------ fencing

    async def take_office(self, holder: str) -> int:
        """Bump the fencing epoch and return the new one; older epochs are now stale."""
        params = {"b_holder": holder, "b_now": _now()}

        def op(conn: Connection) -> int:
            return int(conn.execute(self._take_office, params).scalar_one())

        return await self._write(op, None)

    async def current_epoch(self) -> int:
        def op(conn: Connection) -> int:
            return int(conn.execute(self._epoch_read).scalar_one())

        return await self._read(op)

    # ------------------------------------------------------------------ lease

    async def get_lease(self) -> LeaseRow:
        """The scheduler lease row (leadership without Kubernetes)."""
        cols = scheduler_lease.c

        def op(conn: Connection) -> LeaseRow:
            r = conn.execute(
                sa.select(
                    cols.holder,
                    cols.acquire_time,
                    cols.renew_time,
                    cols.lease_duration,
                    cols.transitions,
                    cols.version,
                ).where(cols.id == 1)
            ).one()
            return LeaseRow(r[0], r[1], r[2], r[3], r[4], r[5])

        return await self._read(op)

    async def write_lease(self, expected_version: int, lease: LeaseRow) -> LeaseRow | None:
        """Compare-and-set the lease row on its version; the written row, or None if
        someone wrote it since ``expected_version`` was read."""
        cols = scheduler_lease.c
        new_version = expected_version + 1

        def op(conn: Connection) -> bool:
            result = conn.execute(
                sa.update(scheduler_lease)
                .where(cols.id == 1, cols.version == expected_version)
                .values(
                    holder=lease.holder,
                    acquire_time=lease.acquire_time,
                    renew_time=lease.renew_time,
                    lease_duration=lease.lease_duration,
                    transitions=lease.transitions,
                    version=new_version,
                )
            )
            return bool(result.rowcount == 1)

        if not await self._write(op, None):
            return None
        return LeaseRow(
            lease.holder,
            lease.acquire_time,
            lease.renew_time,
            lease.lease_duration,
            lease.transitions,
            new_version,
        )

    # ------------------------------------------------------------------ dags

    async def upsert_dag(
        self, dag_id: str, *, fileloc: str, spec_json: str, spec_hash: str, source: str | None
    ) -> bool:
        """Insert or update a DAG (re-activating it); True if inserted or changed.
        A paused DAG stays paused."""
        params = {
            "dag_id": dag_id,
            "fileloc": fileloc,
            "spec_json": spec_json,
            "spec_hash": spec_hash,
            "source": source,
            "paused": False,
            "active": True,
            "updated_at": _now(),
        }

        def op(conn: Connection) -> bool:
            return conn.execute(self._upsert_dag, params).first() is not None

        return await self._write(op, None)

    async def get_dag(self, dag_id: str) -> DagRow | None:
        stmt = self._dag_select.where(dags.c.dag_id == dag_id)

        def op(conn: Connection) -> DagRow | None:
            row = conn.execute(stmt).first()
            return None if row is None else _dag_row(row)

        return await self._read(op)

    async def list_dags(self) -> list[DagRow]:
        stmt = self._dag_select.order_by(dags.c.dag_id)

        def op(conn: Connection) -> list[DagRow]:
            return [_dag_row(row) for row in conn.execute(stmt)]

        return await self._read(op)

    async def dag_fingerprint(self) -> tuple[Any, ...]:
        """Changes whenever any DAG row does (every write sets its updated_at): the
        scheduler's poll reads this one row and the DAGs only when it moved."""

        def op(conn: Connection) -> tuple[Any, ...]:
            return tuple(conn.execute(self._dag_fingerprint).one())

        return await self._read(op)

    async def list_dag_versions(self) -> list[DagVersion]:
        """Every DAG's id, spec hash and flags, without the spec itself."""

        def op(conn: Connection) -> list[DagVersion]:
            rows = conn.execute(self._dag_versions)
            return [DagVersion(r[0], r[1], bool(r[2]), bool(r[3])) for r in rows]

        return await self._read(op)

    async def get_dag_specs(self, dag_ids: Collection[str]) -> dict[str, tuple[str, str]]:
        """``dag_id -> (spec_hash, spec_json)`` for the given DAGs."""
        wanted = sorted(set(dag_ids))
        cols = (dags.c.dag_id, dags.c.spec_hash, dags.c.spec_json)

        def op(conn: Connection) -> dict[str, tuple[str, str]]:
            found: dict[str, tuple[str, str]] = {}
            for chunk in _chunks(wanted, IN_CHUNK):
                for r in conn.execute(sa.select(*cols).where(dags.c.dag_id.in_(chunk))):
                    found[r[0]] = (r[1], r[2])
            return found

        return await self._read(op)

    async def set_dag_paused(self, dag_id: str, paused: bool) -> bool:
        """Pause or unpause; False if there is no such DAG."""
        stmt = (
            sa.update(dags).where(dags.c.dag_id == dag_id).values(paused=paused, updated_at=_now())
        )

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, None)

    async def set_dag_error(self, fileloc: str, error: str | None) -> None:
        """Record the import error of a DAG file, or clear it (``error=None``)."""

        def op(conn: Connection) -> None:
            if error is None:
                conn.execute(
                    sa.delete(dag_import_errors).where(dag_import_errors.c.fileloc == fileloc)
                )
            else:
                conn.execute(
                    self._upsert_dag_error,
                    {"fileloc": fileloc, "error": error, "updated_at": _now()},
                )

        await self._write(op, None)

    async def list_dag_errors(self) -> list[tuple[str, str]]:
        """(fileloc, error) of every DAG file whose last import failed."""
        stmt = sa.select(dag_import_errors.c.fileloc, dag_import_errors.c.error).order_by(
            dag_import_errors.c.fileloc
        )

        def op(conn: Connection) -> list[tuple[str, str]]:
            return [(str(r[0]), str(r[1])) for r in conn.execute(stmt)]

        return await self._read(op)

    async def deactivate_dags_except(self, dag_ids: Collection[str]) -> None:
        """Mark every DAG not in ``dag_ids`` inactive; their history stays."""
        keep = sorted(set(dag_ids))

        def op(conn: Connection) -> None:
            if len(keep) <= IN_CHUNK:
                conn.execute(
                    sa.update(dags)
                    .where(dags.c.active, dags.c.dag_id.not_in(keep))
                    .values(active=False, updated_at=_now())
                )
                return
            kept = set(keep)
            active = conn.execute(sa.select(dags.c.dag_id).where(dags.c.active)).scalars()
            gone = [dag_id for dag_id in active if dag_id not in kept]
            for chunk in _chunks(gone, IN_CHUNK):
                conn.execute(
                    sa.update(dags)
                    .where(dags.c.dag_id.in_(chunk))
                    .values(active=False, updated_at=_now())
                )

        await self._write(op, None)

    # ------------------------------------------------------------------ runs

    async def create_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        run_type: str,
        logical_date: float | None,
        conf: Mapping[str, Any],
        tasks: Sequence[TaskSeed],
        epoch: int | None,
    ) -> RunRow:
        """Create a queued run and its task instances (state none, try 0) at once;
        RunExists if the DAG already has a run with this id."""
        if run_type not in RUN_TYPES:
            raise ValueError(f"run_type must be one of {', '.join(RUN_TYPES)}, not {run_type!r}")
        task_ids = [seed.task_id for seed in tasks]
        if len(set(task_ids)) != len(task_ids):
            raise ValueError(f"duplicate task ids in the seeds of run {run_id!r}")
        now = _now()
        conf_dict = dict(conf)
        run_params = {
            "dag_id": dag_id,
            "run_id": run_id,
            "state": RunState.QUEUED.value,
            "run_type": run_type,
            "logical_date": logical_date,
            "conf": json.dumps(conf_dict, separators=(",", ":"), sort_keys=True),
            "created_at": now,
        }

        def op(conn: Connection) -> int:
            pk = conn.execute(self._insert_run, run_params).scalar()
            if pk is None:
                raise RunExists(dag_id, run_id)
            if tasks:
                conn.execute(
                    self._insert_tis,
                    [
                        {
                            "run_pk": pk,
                            "dag_id": dag_id,
                            "run_id": run_id,
                            "task_id": seed.task_id,
                            "state": TaskState.NONE.value,
                            "try_number": 0,
                            "max_tries": seed.max_tries,
                            "pool": seed.pool,
                            "pool_slots": seed.pool_slots,
                            "priority": seed.priority,
                            "updated_at": now,
                        }
                        for seed in tasks
                    ],
                )
            return int(pk)

        pk = await self._write(op, epoch)
        return RunRow(
            pk, dag_id, run_id, RunState.QUEUED, run_type, logical_date, conf_dict, now,
            None, None, None,
        )  # fmt: skip

    async def get_run(self, run_pk: int) -> RunRow | None:
        def op(conn: Connection) -> RunRow | None:
            row = conn.execute(self._run_by_pk, {"b_pk": run_pk}).first()
            return None if row is None else _run_row(row)

        return await self._read(op)

    async def find_run(self, dag_id: str, run_id: str) -> RunRow | None:
        def op(conn: Connection) -> RunRow | None:
            row = conn.execute(self._run_by_id, {"b_dag_id": dag_id, "b_run_id": run_id}).first()
            return None if row is None else _run_row(row)

        return await self._read(op)

    async def list_runs(
        self,
        *,
        dag_id: str | None = None,
        states: Collection[RunState] | None = None,
        limit: int = 100,
        before_pk: int | None = None,
    ) -> list[RunRow]:
        """Runs newest first; pass the last pk of a page as ``before_pk`` for the next."""
        stmt = sa.select(dag_runs)
        if dag_id is not None:
            stmt = stmt.where(_run.dag_id == dag_id)
        if states is not None:
            stmt = stmt.where(_run.state.in_(sorted(RunState(s).value for s in states)))
        if before_pk is not None:
            stmt = stmt.where(_run.pk < before_pk)
        stmt = stmt.order_by(_run.pk.desc()).limit(limit)

        def op(conn: Connection) -> list[RunRow]:
            return [_run_row(row) for row in conn.execute(stmt)]

        return await self._read(op)

    async def transition_run(
        self,
        run_pk: int,
        expected: RunState,
        new: RunState,
        *,
        epoch: int | None,
        **fields: Any,
    ) -> bool:
        """Compare-and-set the run's state; False if it was not in ``expected``.
        ``fields``: started_at, ended_at, message."""
        expected, new = RunState(expected), RunState(new)
        check_run_transition(expected, new)
        _check_fields(fields, RUN_FIELDS, "transition_run")
        keys = tuple(sorted(fields))
        stmt = self._run_update(keys)
        params: dict[str, Any] = {"b_pk": run_pk, "b_expected": expected.value, "b_new": new.value}
        params.update({"v_" + key: fields[key] for key in keys})

        def op(conn: Connection) -> bool:
            return conn.execute(stmt, params).rowcount == 1

        return await self._write(op, epoch)

    async def last_scheduled_run(self, dag_id: str) -> RunRow | None:
        """The scheduled run with the latest logical date."""

        def op(conn: Connection) -> RunRow | None:
            row = conn.execute(self._last_scheduled, {"b_dag_id": dag_id}).first()
            return None if row is None else _run_row(row)

        return await self._read(op)

    # ------------------------------------------------------------------ task instances

    async def list_task_instances(
        self,
        *,
        run_pk: int | None = None,
        states: Collection[TaskState] | None = None,
        dag_id: str | None = None,
        limit: int | None = None,
        after_pk: int | None = None,
    ) -> list[TaskInstanceRow]:
        """Task instances in pk order; pass the last pk of a page as ``after_pk``."""
        stmt = sa.select(task_instances)
        if run_pk is not None:
            stmt = stmt.where(_ti.run_pk == run_pk)
        if dag_id is not None:
            stmt = stmt.where(_ti.dag_id == dag_id)
        if states is not None:
            stmt = stmt.where(_ti.state.in_(sorted(TaskState(s).value for s in states)))
        if after_pk is not None:
            stmt = stmt.where(_ti.pk > after_pk)
        stmt = stmt.order_by(_ti.pk)
        if limit is not None:
            stmt = stmt.limit(limit)

        def op(conn: Connection) -> list[TaskInstanceRow]:
            return [_ti_row(row) for row in conn.execute(stmt)]

        return await self._read(op)

    async def get_task_instance(self, ti_pk: int) -> TaskInstanceRow | None:
        def op(conn: Connection) -> TaskInstanceRow | None:
            row = conn.execute(self._ti_by_pk, {"b_pk": ti_pk}).first()
            return None if row is None else _ti_row(row)

        return await self._read(op)

    async def get_task_instances(self, ti_pks: Collection[int]) -> list[TaskInstanceRow]:
        """The given task instances (those that exist), ordered by pk."""
        pks = sorted(set(ti_pks))

        def op(conn: Connection) -> list[TaskInstanceRow]:
            rows: list[TaskInstanceRow] = []
            for chunk in _chunks(pks, IN_CHUNK):
                rows.extend(_ti_row(r) for r in conn.execute(self._ti_by_pks, {"b_pks": chunk}))
            return sorted(rows, key=lambda r: r.pk)

        if not pks:
            return []
        return await self._read(op)

    async def transition_task(
        self,
        ti_pk: int,
        expected: TaskState,
        new: TaskState,
        *,
        epoch: int | None,
        expected_try: int | None = None,
        **fields: Any,
    ) -> bool:
        """Compare-and-set one task instance's state (and its try, if given);
        False if the row was not in ``expected`` (or not on ``expected_try``)."""
        expected, new = TaskState(expected), TaskState(new)
        check_task_transition(expected, new)
        _check_fields(fields, TASK_FIELDS, "transition_task")
        keys = tuple(sorted(fields))
        stmt = self._ti_update(keys, expected_try is not None)
        params: dict[str, Any] = {
            "b_pk": ti_pk,
            "b_expected": expected.value,
            "b_new": new.value,
            "b_now": _now(),
        }
        if expected_try is not None:
            params["b_try"] = expected_try
        params.update({"v_" + key: fields[key] for key in keys})

        def op(conn: Connection) -> bool:
            return conn.execute(stmt, params).rowcount == 1

        return await self._write(op, epoch)

    async def transition_tasks(
        self,
        changes: Sequence[TaskChange],
        *,
        epoch: int | None,
        tickets: Sequence[tuple[str, int, int]] = (),
        tickets_expire_at: float = 0.0,
    ) -> list[bool]:
        """Many compare-and-set transitions in one transaction; per-change success.

        The rows are locked and read first, so which changes win is known before
        writing; changes to one row apply in order (none->scheduled then
        scheduled->queued in one batch both succeed). An illegal transition anywhere
        in the batch refuses the whole batch before anything is written.
        """
        if not changes and not tickets:
            return []
        ticket_rows = [
            {"hash": h, "ti_pk": pk, "try_number": t, "expires_at": tickets_expire_at}
            for h, pk, t in tickets
        ]
        for change in changes:
            check_task_transition(TaskState(change.expected), TaskState(change.new))
            _check_fields(change.fields, TASK_FIELDS, "transition_tasks")
        now = _now()
        pks = sorted({change.ti_pk for change in changes})

        def op(conn: Connection) -> list[bool]:
            current: dict[int, tuple[str, int]] = {}
            for chunk in _chunks(pks, IN_CHUNK):
                for pk, state, try_number in conn.execute(self._ti_lock, {"b_pks": chunk}):
                    current[pk] = (state, try_number)

            results = [False] * len(changes)
            groups: list[tuple[tuple[tuple[str, ...], bool], list[dict[str, Any]]]] = []
            for index, change in enumerate(changes):
                row = current.get(change.ti_pk)
                expected = TaskState(change.expected).value
                if row is None or row[0] != expected:
                    continue
                if change.expected_try is not None and row[1] != change.expected_try:
                    continue
                results[index] = True
                fields = change.fields
                new = TaskState(change.new).value
                next_try = fields.get("try_number", row[1])
                current[change.ti_pk] = (new, next_try if isinstance(next_try, int) else row[1])
                keys = tuple(sorted(fields))
                key = (keys, change.expected_try is not None)
                params: dict[str, Any] = {
                    "b_pk": change.ti_pk,
                    "b_expected": expected,
                    "b_new": new,
                    "b_now": now,
                }
                if change.expected_try is not None:
                    params["b_try"] = change.expected_try
                for name in keys:
                    params["v_" + name] = fields[name]
                # Consecutive changes of one shape go out as one executemany, in order.
                if groups and groups[-1][0] == key:
                    groups[-1][1].append(params)
                else:
                    groups.append((key, [params]))

            for (keys, with_try), batch in groups:
                result = conn.execute(self._ti_update(keys, with_try), batch)
                if result.rowcount >= 0 and result.rowcount != len(batch):
                    raise StoreError(
                        f"batch transition updated {result.rowcount} rows, expected {len(batch)}"
                    )
            if ticket_rows:  # the launches' tickets, in the same transaction
                conn.execute(self._insert_ticket, ticket_rows)
            return results

        return await self._write(op, epoch)

    async def heartbeat(self, ti_pk: int, try_number: int, at: float) -> bool:
        """Record an agent's heartbeat; only for a running instance on that try."""
        params = {"b_pk": ti_pk, "b_try": try_number, "b_at": at}

        def op(conn: Connection) -> bool:
            return conn.execute(self._heartbeat, params).rowcount == 1

        return await self._write(op, None)

    async def note_queued(
        self,
        ti_pk: int,
        try_number: int,
        reason: str | None,
        message: str | None,
        *,
        epoch: int | None,
    ) -> bool:
        """Say why a queued try waits for its executor (None, None: it no longer does).

        Not a state change: only a queued instance on that try, under the leader's epoch.
        """
        stmt = (
            sa.update(task_instances)
            .where(
                task_instances.c.pk == ti_pk,
                task_instances.c.state == TaskState.QUEUED.value,
                task_instances.c.try_number == try_number,
            )
            .values(reason=reason, message=message, updated_at=_now())
        )

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, epoch)

    # ------------------------------------------------------------------ pools

    async def upsert_pool(self, name: str, slots: int, description: str = "") -> None:
        params = {"name": name, "slots": slots, "description": description, "updated_at": _now()}

        def op(conn: Connection) -> None:
            conn.execute(self._upsert_pool, params)

        await self._write(op, None)

    async def delete_pool(self, name: str) -> bool:
        stmt = sa.delete(pools).where(pools.c.name == name)

        def op(conn: Connection) -> bool:
            return conn.execute(stmt).rowcount == 1

        return await self._write(op, None)

    async def list_pools(self) -> list[PoolRow]:
        stmt = sa.select(pools).order_by(pools.c.name)

        def op(conn: Connection) -> list[PoolRow]:
            return [PoolRow(r[0], r[1], r[2], r[3]) for r in conn.execute(stmt)]

        return await self._read(op)

    # ------------------------------------------------------------------ agent tickets

    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse:
        """Use a ticket once. A failure says why: unknown, already used (replayed, even
        once it has also expired), or expired; ti_pk/try_number name the ticket's task."""

        def op(conn: Connection) -> TicketUse:
            row = conn.execute(self._consume_ticket, {"b_hash": ticket_hash, "b_now": now}).first()
            if row is not None:
                return TicketUse("ok", int(row[0]), int(row[1]))
            row = conn.execute(self._ticket_by_hash, {"b_hash": ticket_hash}).first()
            if row is None:
                return TicketUse("unknown", None, None)
            return TicketUse(
                "replayed" if row[2] is not None else "expired", int(row[0]), int(row[1])
            )

        return await self._write(op, None)

    # ------------------------------------------------------------------ task logs

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
            conn.execute(self._log_insert, rows)

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
