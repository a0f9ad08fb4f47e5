"""A mapped task's expansion: its placeholder task instance replaced by its items.

One transaction: the placeholder (still ``none``, never tried) is deleted and one task
instance per item inserted, ``task[0]``, ``task[1]`` ..., each with its item (JSON
text) in ``map_item``. If the placeholder moved meanwhile nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leoflow.domain.mapping import item_task_id
from leoflow.domain.states import TaskState
from leoflow.store.base import now
from leoflow.store.rows import TaskSeed
from leoflow.store.runs import _seed_rows
from leoflow.store.schema import task_instances

if TYPE_CHECKING:
    from leoflow.store.store import Store

_ti = task_instances.c


class RunKey(Protocol):
    """What names a run (a ``RunRow``, the scheduler's mirror)."""

    @property
    def pk(self) -> int: ...
    @property
    def dag_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...


async def expand_task(
    store: Store,
    ti_pk: int,
    run: RunKey,
    seed: TaskSeed,
    items: Sequence[str],
    *,
    epoch: int | None,
) -> bool:
    """Replace the placeholder ``ti_pk`` (task ``seed.task_id`` of ``run``) by one task
    instance per item; False if it was not ``none`` any more (nothing written)."""
    seeds = [replace(seed, task_id=item_task_id(seed.task_id, i)) for i in range(len(items))]
    rows = _seed_rows(seeds, run.pk, run.dag_id, run.run_id, now())
    for row, item in zip(rows, items, strict=True):
        row["map_item"] = item
    delete = sa.delete(task_instances).where(
        _ti.pk == ti_pk, _ti.state == TaskState.NONE.value, _ti.try_number == 0
    )

    def op(conn: Connection) -> bool:
        if conn.execute(delete).rowcount != 1:
            return False
        conn.execute(sa.insert(task_instances), rows)
        return True

    return await store._write(op, epoch)
