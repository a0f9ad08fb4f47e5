"""Run records: a DAG run's row and, created with it, its task instances.

A run's state changes only by compare-and-set (``transition_run``), checked
against the domain's legal transitions first.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.run_ids import GENERATED_ID_TRIES, generated_run_id
from leoflow.domain.states import RunState, TaskState, check_run_transition
from leoflow.domain.stored_json import read_stored_conf
from leoflow.store.base import StoreBase, check_fields, narrowed, now, state_params, state_update
from leoflow.store.errors import RunExists
from leoflow.store.rows import RunRow, TaskInstanceRow, TaskSeed, task_instance_row
from leoflow.store.schema import dag_runs, task_instances

RUN_FIELDS = frozenset({"started_at", "ended_at", "message"})
# manual: triggered; scheduled: cron; local: created and driven by one `leoflow run` process.
RUN_TYPES = ("manual", "scheduled", "local", "backfill", "asset")

_run = dag_runs.c


def _run_row(r: Sequence[Any]) -> RunRow:
    return RunRow(
        r[0], r[1], r[2], RunState(r[3]), r[4], r[5], read_stored_conf(r[6]), r[7], r[8], r[9],
        r[10], r[11],
    )  # fmt: skip


@functools.cache
def run_update(keys: tuple[str, ...]) -> sa.Update:
    return state_update(dag_runs, keys)


def _seed_rows(
    seeds: Sequence[TaskSeed], run_pk: int, dag_id: str, run_id: str, at: float
) -> list[dict[str, Any]]:
    return [
        {
            "run_pk": run_pk,
            "dag_id": dag_id,
            "run_id": run_id,
            "task_id": seed.task_id,
            "state": TaskState.NONE.value,
            "try_number": 0,
            "max_tries": seed.max_tries,
            "pool": seed.pool,
            "pool_slots": seed.pool_slots,
            "priority": seed.priority,
            "updated_at": at,
        }
        for seed in seeds
    ]


class RunRecords(StoreBase):
    def _build_statements(self) -> None:
        super()._build_statements()
        ins = self._insert(dag_runs)
        self._insert_run = ins.on_conflict_do_nothing(
            index_elements=[_run.dag_id, _run.run_id]
        ).returning(_run.pk)
        self._insert_tis = sa.insert(task_instances)
        self._tis_of_run = (
            sa.select(task_instances)
            .where(task_instances.c.run_pk == sa.bindparam("b_pk"))
            .order_by(task_instances.c.pk)
        )
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

    async def create_run(
        self,
        dag_id: str,
        run_id: str | None,
        *,
        run_type: str,
        logical_date: float | None,
        conf: Mapping[str, Any],
        tasks: Sequence[TaskSeed],
        epoch: int | None,
    ) -> RunRow:
        """Create a queued run and its task instances (state none, try 0) at once.

        ``run_id`` None: a made-up one (``domain.run_ids``), stamped with the logical
        date or else the creation time; one another run of the DAG holds already is
        drawn again in the same transaction. RunExists if the DAG already has a run
        with the id given, or with a scheduled run's (which has no random part)."""
        row, _ = await self._create_run(
            dag_id, run_id, run_type, logical_date, conf, tasks, epoch, read_back=False
        )
        return row

    async def create_run_with_tasks(
        self,
        dag_id: str,
        run_id: str | None,
        *,
        run_type: str,
        logical_date: float | None,
        conf: Mapping[str, Any],
        tasks: Sequence[TaskSeed],
        epoch: int | None,
    ) -> tuple[RunRow, list[TaskInstanceRow]]:
        """``create_run``, and the task instances it created (pk order), read back in
        its transaction: a read of their own after it was a transaction per run."""
        return await self._create_run(
            dag_id, run_id, run_type, logical_date, conf, tasks, epoch, read_back=True
        )

    async def _create_run(
        self,
        dag_id: str,
        run_id: str | None,
        run_type: str,
        logical_date: float | None,
        conf: Mapping[str, Any],
        tasks: Sequence[TaskSeed],
        epoch: int | None,
        *,
        read_back: bool,
        also: Callable[[Connection, int], None] | None = None,
    ) -> tuple[RunRow, list[TaskInstanceRow]]:
        """``also(conn, run_pk)``: more writes of the run's transaction (raise to undo it)."""
        if run_type not in RUN_TYPES:
            raise ValueError(f"run_type must be one of {', '.join(RUN_TYPES)}, not {run_type!r}")
        task_ids = [seed.task_id for seed in tasks]
        if len(set(task_ids)) != len(task_ids):
            raise ValueError(f"duplicate task ids in the seeds of run {run_id!r} of {dag_id!r}")
        at = now()
        conf_dict = dict(conf)
        run_params = {
            "dag_id": dag_id,
            "state": RunState.QUEUED.value,
            "run_type": run_type,
            "logical_date": logical_date,
            "conf": json.dumps(conf_dict, separators=(",", ":"), sort_keys=True),
            "created_at": at,
        }
        # A made-up id may be drawn again; a given or scheduled one may not.
        draws = GENERATED_ID_TRIES if run_id is None and run_type != "scheduled" else 1

        def op(conn: Connection) -> tuple[int, str, list[TaskInstanceRow]]:
            for _ in range(draws):
                chosen = run_id or generated_run_id(run_type, logical_date or at)
                row = {**run_params, "run_id": chosen}
                pk = self._insert_one(conn, self._insert_run, row).scalar()
                if pk is not None:
                    break
            else:  # ON CONFLICT DO NOTHING: the transaction is still good to go on
                raise RunExists(dag_id, chosen)
            if also is not None:
                also(conn, int(pk))
            if tasks:
                self._insert_many(conn, self._insert_tis, _seed_rows(tasks, pk, dag_id, chosen, at))
            tis = []
            if read_back and tasks:
                tis = [task_instance_row(r) for r in conn.execute(self._tis_of_run, {"b_pk": pk})]
            return int(pk), chosen, tis

        pk, chosen, tis = await self._write(op, epoch)
        row = RunRow(
            pk, dag_id, chosen, RunState.QUEUED, run_type, logical_date, conf_dict, at,
            None, None, None,
        )  # fmt: skip
        return row, tis

    async def get_run(self, run_pk: int) -> RunRow | None:
        return await self._one_run(self._run_by_pk, {"b_pk": run_pk})

    async def find_run(self, dag_id: str, run_id: str) -> RunRow | None:
        return await self._one_run(self._run_by_id, {"b_dag_id": dag_id, "b_run_id": run_id})

    async def last_scheduled_run(self, dag_id: str) -> RunRow | None:
        """The scheduled run with the latest logical date."""
        return await self._one_run(self._last_scheduled, {"b_dag_id": dag_id})

    async def _one_run(self, stmt: sa.Select[Any], params: dict[str, Any]) -> RunRow | None:
        def op(conn: Connection) -> RunRow | None:
            row = conn.execute(stmt, params).first()
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
        stmt = narrowed(
            sa.select(dag_runs),
            None if dag_id is None else _run.dag_id == dag_id,
            None if states is None else _run.state.in_(sorted(RunState(s).value for s in states)),
            None if before_pk is None else _run.pk < before_pk,
        ).order_by(_run.pk.desc())
        stmt = stmt.limit(limit)

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
        check_fields(fields, RUN_FIELDS, "transition_run")
        keys = tuple(sorted(fields))
        stmt = run_update(keys)
        params = state_params(run_pk, expected.value, new.value, keys, fields)

        def op(conn: Connection) -> bool:
            return conn.execute(stmt, params).rowcount == 1

        return await self._write(op, epoch)
