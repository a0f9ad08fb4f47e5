"""A run's task instances as its page shows them: counted by state over the whole run,
and one page of them filtered by state, by a search over task ids, or to the items of
one mapped task. Each one statement on ``uq_task_instances_run_pk_task_id``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.states import TaskState
from leoflow.store.base import StoreBase, narrowed
from leoflow.store.rows import TaskInstanceRow
from leoflow.store.rows import task_instance_row as _ti_row
from leoflow.store.schema import task_instances

_ti = task_instances.c


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which of a run's task instances a page lists (every field optional)."""

    states: frozenset[TaskState] | None = None
    contains: str | None = None  # a substring of the task id, as typed
    items_of: str | None = None  # a mapped task: its items ``task[i]`` only


def _conditions(run_pk: int, f: TaskFilter) -> list[sa.ColumnElement[bool] | None]:
    return [
        _ti.run_pk == run_pk,
        None if f.states is None else _ti.state.in_(sorted(s.value for s in f.states)),
        # autoescape: ``_`` and ``%`` in a task id are characters, not wildcards.
        None if not f.contains else _ti.task_id.contains(f.contains, autoescape=True),
        None if not f.items_of else _ti.task_id.startswith(f.items_of + "[", autoescape=True),
    ]


class RunTaskRecords(StoreBase):
    async def count_run_task_states(self, run_pk: int) -> Counter[TaskState]:
        """``state -> how many`` of the run's task instances, all of them."""
        stmt = sa.select(_ti.state, sa.func.count()).where(_ti.run_pk == run_pk).group_by(_ti.state)

        def op(conn: Connection) -> Counter[TaskState]:
            return Counter({TaskState(s): int(n) for s, n in conn.execute(stmt)})

        return await self._read(op)

    async def run_task_page(
        self,
        run_pk: int,
        task_filter: TaskFilter,
        *,
        limit: int,
        after_pk: int | None = None,
    ) -> tuple[list[TaskInstanceRow], int]:
        """A page of the run's task instances that pass ``task_filter``, in pk order,
        and how many pass it in all."""
        where = _conditions(run_pk, task_filter)
        page = (
            narrowed(
                sa.select(task_instances), *where, None if after_pk is None else _ti.pk > after_pk
            )
            .order_by(_ti.pk)
            .limit(limit)
        )
        total = narrowed(sa.select(sa.func.count()).select_from(task_instances), *where)

        def op(conn: Connection) -> tuple[list[TaskInstanceRow], int]:
            rows = [_ti_row(row) for row in conn.execute(page)]
            return rows, int(conn.execute(total).scalar_one())

        return await self._read(op)
