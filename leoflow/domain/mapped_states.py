"""A mapped task's items seen as one task: their states counted, and the worst of them.

A mapped task ``load`` is replaced in its run by items ``load[0]``, ``load[1]`` ...
(``leoflow.domain.mapping``), so a view keyed by the DAG's task ids finds nothing
under ``load``. The graph, the grid and the live updates fold the items back into
their task with this. Pure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from leoflow.domain.states import TaskState

_ITEM = re.compile(r"^(?P<task>.+)\[(?P<index>\d+)\]$")

# Which item's state a mapped task shows when its items differ: the one a user must
# look at first (a failure), then what is still moving, then how it ended.
SEVERITY: tuple[TaskState, ...] = (
    TaskState.FAILED,
    TaskState.UPSTREAM_FAILED,
    TaskState.UP_FOR_RETRY,
    TaskState.RUNNING,
    TaskState.QUEUED,
    TaskState.SCHEDULED,
    TaskState.NONE,
    TaskState.SKIPPED,
    TaskState.SUCCESS,
)
_RANK = {state: i for i, state in enumerate(SEVERITY)}


def item_of(task_id: str) -> tuple[str, int] | None:
    """``("load", 3)`` for ``load[3]``; None for a task id that names no item."""
    found = _ITEM.match(task_id)
    return None if found is None else (found["task"], int(found["index"]))


@dataclass(frozen=True, slots=True)
class ItemStates:
    """How many items of one mapped task are in each state."""

    counts: tuple[tuple[TaskState, int], ...]  # most severe first

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def worst(self) -> TaskState:
        return self.counts[0][0]

    def words(self) -> str:
        """``"1 failed · 1 running · 198 success"``."""
        return " · ".join(f"{n} {state.value.replace('_', ' ')}" for state, n in self.counts)


def fold_items(states: Mapping[str, TaskState], mapped: Collection[str]) -> dict[str, ItemStates]:
    """The items' states of each task of ``mapped`` that has items in ``states``."""
    counted: dict[str, Counter[TaskState]] = {}
    for task_id, state in states.items():
        item = item_of(task_id)
        if item is not None and item[0] in mapped:
            counted.setdefault(item[0], Counter())[state] += 1
    return {task: _summary(counter.items()) for task, counter in counted.items()}


def _summary(counts: Iterable[tuple[TaskState, int]]) -> ItemStates:
    return ItemStates(tuple(sorted(counts, key=lambda c: _RANK.get(c[0], len(SEVERITY)))))


def with_items_folded(
    states: Mapping[str, TaskState], mapped: Collection[str]
) -> dict[str, TaskState]:
    """``states`` plus, for each mapped task that has items, its items' worst state."""
    out = dict(states)
    for task, items in fold_items(states, mapped).items():
        out.setdefault(task, items.worst)
    return out
