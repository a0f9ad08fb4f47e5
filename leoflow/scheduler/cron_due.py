"""Which DAGs' cron must be looked at in this poll: a heap of next fire times.

Every DAG with a schedule has a next fire time once it has been looked at. A poll
looks only at the DAGs whose time has come (the top of the heap), so an idle poll
costs the same with ten scheduled DAGs or a thousand. Everything is looked at
again after whatever can move a fire time without reaching the heap: a new or
changed spec (``forget``), a DAG paused or unpaused, and a poll that stopped
halfway (``interrupted``: the store failed under it).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping

from leoflow.domain.dag import DagSpec


class CronDue:
    def __init__(self) -> None:
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._everything = True
        self._paused_seen: Collection[str] = frozenset()

    def get(self, dag_id: str) -> float | None:
        return self._due.get(dag_id)

    def set(self, dag_id: str, due: float) -> None:
        self._due[dag_id] = due
        if due != float("inf"):
            heapq.heappush(self._heap, (due, dag_id))

    def forget(self, dag_id: str) -> None:
        """A new spec: its next fire time is worked out again at the next poll."""
        self._due.pop(dag_id, None)
        self._everything = True

    def interrupted(self) -> None:
        """The DAGs taken off the heap were not all looked at: look at every one next."""
        self._everything = True

    def to_check(
        self, now: float, dags: Mapping[str, DagSpec], paused: Collection[str]
    ) -> list[tuple[str, DagSpec]]:
        """The unpaused scheduled DAGs to look at now, in the order the old full walk
        took them when everything is due."""
        if paused is not self._paused_seen and paused != self._paused_seen:
            self._everything = True
        self._paused_seen = paused
        if self._everything:
            self._everything = False
            self._heap = [(t, d) for d, t in self._due.items() if t != float("inf")]
            heapq.heapify(self._heap)
            return [
                (dag_id, spec)
                for dag_id, spec in dags.items()
                if spec.schedule is not None and dag_id not in paused
            ]
        heap, due = self._heap, self._due
        picked: dict[str, DagSpec] = {}
        while heap and heap[0][0] <= now:
            t, dag_id = heapq.heappop(heap)
            spec = dags.get(dag_id)
            if due.get(dag_id) != t or spec is None or spec.schedule is None:
                continue  # superseded by a later set(), or the DAG is gone
            if dag_id in paused:
                continue  # unpausing changes ``paused``, which looks at everything again
            picked[dag_id] = spec
        return list(picked.items())
