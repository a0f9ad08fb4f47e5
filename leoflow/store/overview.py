"""Read-only queries for overview pages (the web UI): bounded, one statement each.

A page that shows 25 DAGs must not read every active run, nor ask once per DAG.
Each query here answers a whole page's question in one statement that an existing
index serves (checked with EXPLAIN on PostgreSQL):

* counts of runs by DAG and state: ``ix_dag_runs_dag_id_state_pk`` (index-only);
* the last N runs of each of some DAGs: a LATERAL per DAG over ``ix_dag_runs_dag_id_pk``
  (PostgreSQL; see ``runs_per_dag`` for why its condition is a range); SQLite,
  local and without LATERAL, asks per DAG in one transaction;
* the task states of some runs: ``uq_task_instances_run_pk_task_id``;
* the first N scheduled task instances in admission order: ``ix_task_instances_state``
  then a top-N sort of the scheduled ones only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import RunState, TaskState
from leoflow.domain.stored_json import read_stored_conf
from leoflow.store.base import StoreBase, chunks
from leoflow.store.rows import DagRow, RunRow, TaskInstanceRow
from leoflow.store.schema import dag_import_errors, dag_runs, dags, task_instances

_run = dag_runs.c
_ti = task_instances.c


def _as_run(r: Sequence[Any]) -> RunRow:
    state, conf = RunState(r[3]), read_stored_conf(r[6])
    return RunRow(r[0], r[1], r[2], state, r[4], r[5], conf, r[7], r[8], r[9], r[10], r[11])


def _as_ti(r: Sequence[Any]) -> TaskInstanceRow:
    state = TaskState(r[5])
    return TaskInstanceRow(r[0], r[1], r[2], r[3], r[4], state, r[6], r[7], r[8], r[9], r[10],
                           r[11], r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19], r[20],
                           r[21])  # fmt: skip


def _values(states: Collection[RunState] | Collection[TaskState]) -> list[str]:
    return sorted(str(getattr(s, "value", s)) for s in states)


@dataclass(frozen=True, slots=True)
class DagHead:
    """What a list of DAGs filters and pages on, without the specs (the big part)."""

    dag_id: str
    paused: bool
    active: bool
    last_error: str | None


_DAGS_WITH_ERRORS = dags.outerjoin(dag_import_errors, dag_import_errors.c.fileloc == dags.c.fileloc)


class OverviewRecords(StoreBase):
    """Read-only: no statements of its own to prepare, no writes."""

    async def dag_heads(self) -> list[DagHead]:
        """Every DAG's id, paused and active flags and file error, by dag_id."""
        stmt = (
            sa.select(dags.c.dag_id, dags.c.paused, dags.c.active, dag_import_errors.c.error)
            .select_from(_DAGS_WITH_ERRORS)
            .order_by(dags.c.dag_id)
        )

        def op(conn: Connection) -> list[DagHead]:
            return [DagHead(d, bool(p), bool(a), e) for d, p, a, e in conn.execute(stmt)]

        return await self._read(op)

    async def dags_by_id(self, dag_ids: Collection[str]) -> dict[str, DagRow]:
        """The DAGs of a page, with their specs but not their files (``source`` is None)."""
        ids = sorted(set(dag_ids))
        if not ids:
            return {}
        c = dags.c
        stmt = (
            sa.select(
                c.dag_id, c.fileloc, c.spec_json, c.spec_hash, sa.null(), c.paused, c.active,
                c.updated_at, dag_import_errors.c.error,
            )
            .select_from(_DAGS_WITH_ERRORS)
            .where(c.dag_id.in_(ids))
        )  # fmt: skip

        def op(conn: Connection) -> dict[str, DagRow]:
            return {
                r[0]: DagRow(r[0], r[1], r[2], r[3], None, bool(r[5]), bool(r[6]), r[7], r[8])
                for r in conn.execute(stmt)
            }

        return await self._read(op)

    async def count_runs_by_dag(self, states: Collection[RunState]) -> Counter[tuple[str, str]]:
        """``(dag_id, state) -> number of runs`` for runs in ``states``."""
        stmt = (
            sa.select(_run.dag_id, _run.state, sa.func.count())
            .where(_run.state.in_(_values(states)))
            .group_by(_run.dag_id, _run.state)
        )

        def op(conn: Connection) -> Counter[tuple[str, str]]:
            return Counter({(d, s): int(n) for d, s, n in conn.execute(stmt)})

        return await self._read(op)

    async def runs_per_dag(
        self,
        dag_ids: Collection[str],
        per_dag: int,
        *,
        states: Collection[RunState] | None = None,
        oldest_first: bool = False,
    ) -> dict[str, list[RunRow]]:
        """Up to ``per_dag`` runs of each DAG (newest first, or oldest first), by pk."""
        ids = sorted(set(dag_ids))
        if not ids or per_dag <= 0:
            return {}
        keys = (_run.dag_id, _run.pk)
        order = [k.asc() if oldest_first else k.desc() for k in keys]
        inner = sa.select(dag_runs).order_by(*order).limit(per_dag)
        if states is not None:
            inner = inner.where(_run.state.in_(_values(states)))
        out: dict[str, list[RunRow]] = {d: [] for d in ids}
        if self._sqlite:
            per = inner.where(_run.dag_id == sa.bindparam("b_dag"))

            def op_each(conn: Connection) -> dict[str, list[RunRow]]:
                for dag_id in ids:
                    out[dag_id] = [_as_run(r) for r in conn.execute(per, {"b_dag": dag_id})]
                return out

            return await self._read(op_each)
        wanted = (
            sa.func.unnest(sa.cast(sa.literal(ids), sa.ARRAY(sa.Text)))
            .table_valued("dag_id")
            .render_derived(name="wanted")
        )
        # A range, not ``=``: with ``=`` the planner folds dag_id out of the ORDER BY and,
        # guessing every DAG has its share of runs, walks the pk index backwards with
        # a filter, reading the whole table for a DAG with few runs. The range leaves
        # only ix_dag_runs_dag_id_pk in that order: a few index entries per DAG.
        lateral = inner.where(
            _run.dag_id >= wanted.c.dag_id, _run.dag_id <= wanted.c.dag_id
        ).lateral("r")
        stmt = sa.select(lateral).select_from(wanted.join(lateral, sa.true()))

        def op(conn: Connection) -> dict[str, list[RunRow]]:
            for r in conn.execute(stmt):
                out[r[1]].append(_as_run(r))
            return out

        return await self._read(op)

    async def task_states_of_runs(
        self, run_pks: Collection[int]
    ) -> dict[int, dict[str, TaskState]]:
        """``run pk -> task id -> state`` for each of ``run_pks`` (a page's few runs):
        a grid needs the states only, not 22 columns of 1,200 rows."""
        pks = sorted(set(run_pks))
        out: dict[int, dict[str, TaskState]] = {pk: {} for pk in pks}
        stmt = sa.select(_ti.run_pk, _ti.task_id, _ti.state).where(
            _ti.run_pk.in_(sa.bindparam("b_pks", expanding=True))
        )

        def op(conn: Connection) -> dict[int, dict[str, TaskState]]:
            for part in chunks(pks):
                for run_pk, task_id, state in conn.execute(stmt, {"b_pks": part}):
                    out[run_pk][task_id] = TaskState(state)
            return out

        return await self._read(op) if pks else out

    async def count_task_instances(self, states: Collection[TaskState]) -> Counter[str]:
        """``state -> number of task instances`` for ``states``."""
        stmt = (
            sa.select(_ti.state, sa.func.count())
            .where(_ti.state.in_(_values(states)))
            .group_by(_ti.state)
        )

        def op(conn: Connection) -> Counter[str]:
            return Counter({s: int(n) for s, n in conn.execute(stmt)})

        return await self._read(op)

    async def scheduled_in_admission_order(
        self, limit: int
    ) -> tuple[list[TaskInstanceRow], dict[int, float]]:
        """The first ``limit`` scheduled task instances in the order admission offers
        them (priority, then the run's age, then readiness, then pk), and the
        ``created_at`` of their runs. Admission is greedy in that order, so what holds
        each of them back does not depend on the ones after."""
        stmt = (
            sa.select(task_instances, _run.created_at)
            .join(dag_runs, _run.pk == _ti.run_pk)
            .where(_ti.state == TaskState.SCHEDULED.value)
            .order_by(
                _ti.priority.desc(),
                _run.created_at,
                sa.func.coalesce(_ti.ready_at, 0.0),
                _ti.pk,
            )
            .limit(limit)
        )

        def op(conn: Connection) -> tuple[list[TaskInstanceRow], dict[int, float]]:
            rows = conn.execute(stmt).all()
            return [_as_ti(r) for r in rows], {r[1]: r[-1] for r in rows}  # created_at: last

        return await self._read(op)

    async def run_created_at(self, run_pks: Collection[int]) -> dict[int, float]:
        """``run pk -> created_at`` for ``run_pks``."""
        pks = sorted(set(run_pks))
        if not pks:
            return {}
        stmt = sa.select(_run.pk, _run.created_at).where(
            _run.pk.in_(sa.bindparam("b_pks", expanding=True))
        )

        def op(conn: Connection) -> dict[int, float]:
            return {
                pk: at for part in chunks(pks) for pk, at in conn.execute(stmt, {"b_pks": part})
            }

        return await self._read(op)
