"""``progress.evaluate`` and ``progress.final_state`` kept up to date incrementally.

The scheduler asks, after every batch of task changes, which tasks of a run became
ready (or can never run) and whether the run is over. Answering from scratch walks
the whole run, so a run of n tasks finishing one task at a time costs O(n²). A
``RunReadiness`` instead keeps, per task, how many of its upstreams ended in each
end state (an indegree counter per state) and the set of tasks in ``none`` whose
counts moved since the last question; a question costs what changed, and a task
change costs its out-degree. The answers are exactly ``evaluate``'s and
``final_state``'s (a property test compares them on random DAGs).

Pure: no I/O, nothing above the domain.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Mapping

from leoflow.domain.dag import DagSpec
from leoflow.domain.progress import Readiness
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.trigger_rules import Counts, Decision, TriggerRule, decide

_S, _K, _F, _U = (
    TaskState.SUCCESS,
    TaskState.SKIPPED,
    TaskState.FAILED,
    TaskState.UPSTREAM_FAILED,
)
# Index of each end state in a task's counter list; every other state is unfinished.
_SLOT = {_S: 0, _K: 1, _F: 2, _U: 3}
_BAD = (_F, _U)


class DagShape:
    """What every run of one DAG shares: topological positions, downstream edges
    (one per ``depends_on`` entry, duplicates kept as ``evaluate`` counts them),
    in-degrees, trigger rules and leaves. Built once per DagSpec object."""

    __slots__ = ("downstream", "indegree", "leaves", "position", "rules", "upstream")

    def __init__(self, spec: DagSpec, order: tuple[str, ...]) -> None:
        self.position = {task_id: i for i, task_id in enumerate(order)}
        self.downstream: dict[str, list[str]] = {task_id: [] for task_id in spec.tasks}
        self.upstream: dict[str, tuple[str, ...]] = {}
        self.indegree: dict[str, int] = {}
        self.rules: dict[str, TriggerRule] = {}
        for task_id, task in spec.tasks.items():
            self.upstream[task_id] = tuple(task.depends_on)
            self.indegree[task_id] = len(task.depends_on)
            self.rules[task_id] = task.trigger_rule
            for upstream in task.depends_on:
                self.downstream[upstream].append(task_id)
        self.leaves = frozenset(t for t, downs in self.downstream.items() if not downs)


_SHAPES: OrderedDict[int, tuple[DagSpec, DagShape]] = OrderedDict()
_SHAPES_KEPT = 64  # DAG versions whose shape is kept (a reload makes a new spec)


def shape_of(spec: DagSpec, order: tuple[str, ...]) -> DagShape:
    """The shape of ``spec``, shared by all its runs (one build per spec object)."""
    found = _SHAPES.get(id(spec))
    if found is not None and found[0] is spec:
        _SHAPES.move_to_end(id(spec))
        return found[1]
    shape = DagShape(spec, order)
    _SHAPES[id(spec)] = (spec, shape)
    if len(_SHAPES) > _SHAPES_KEPT:
        _SHAPES.popitem(last=False)
    return shape


class RunReadiness:
    """One run's task states, with the counters that make ``evaluate`` incremental.

    Tell it every state change (``set``). ``evaluate()`` hands its answer over: the
    caller moves every task it reports out of ``none`` (ready → scheduled, the
    others → upstream_failed / skipped), so they are not reported again unless
    ``set`` puts them back in ``none``.
    """

    __slots__ = ("_bad_leaves", "_counts", "_pending", "_shape", "_states", "_unfinished")

    def __init__(
        self, spec: DagSpec, order: tuple[str, ...], states: Mapping[str, TaskState]
    ) -> None:
        self._shape = shape = shape_of(spec, order)
        self._states: dict[str, TaskState] = dict(states)
        self._counts: dict[str, list[int]] = {task_id: [0, 0, 0, 0] for task_id in spec.tasks}
        self._unfinished = 0
        self._bad_leaves = 0
        self._pending: set[str] = set()
        for task_id, state in self._states.items():
            self._count(task_id, None, state, shape)

    @property
    def states(self) -> Mapping[str, TaskState]:
        return self._states

    def set(self, task_id: str, state: TaskState) -> None:
        """Record that ``task_id`` is now in ``state``."""
        old = self._states[task_id]
        if old is not state:
            self._states[task_id] = state
            self._count(task_id, old, state, self._shape)

    def final_state(self) -> RunState | None:
        """``progress.final_state`` in O(1)."""
        if self._unfinished:
            return None
        return RunState.FAILED if self._bad_leaves else RunState.SUCCESS

    def evaluate(self) -> Readiness:
        """``progress.evaluate`` over the tasks whose upstreams changed, in order."""
        shape, states, counts = self._shape, self._states, self._counts
        position = shape.position
        todo = [(position[t], t) for t in self._pending]
        self._pending = set()
        heapq.heapify(todo)
        ready: list[str] = []
        failed: list[tuple[str, tuple[str, ...]]] = []
        skipped: list[tuple[str, tuple[str, ...]]] = []
        seen: set[str] = set()
        while todo:
            _, task_id = heapq.heappop(todo)
            if task_id in seen or states[task_id] is not TaskState.NONE:
                continue
            seen.add(task_id)
            s, k, f, u = counts[task_id]
            total = shape.indegree[task_id]
            decision = decide(shape.rules[task_id], Counts(total, s, k, f, u))
            if decision is Decision.WAIT:
                continue
            if decision is Decision.RUN:
                ready.append(task_id)
                continue
            marked = _U if decision is Decision.UPSTREAM_FAILED else _K
            # Marked now, so the tasks below see it in this same pass (as evaluate's
            # walk in topological order does); they join the walk in order.
            states[task_id] = marked
            self._count(task_id, TaskState.NONE, marked, shape)
            ups = shape.upstream[task_id]
            if marked is _U:
                failed.append((task_id, tuple(x for x in ups if states[x] in _BAD)))
            else:
                skipped.append((task_id, tuple(x for x in ups if states[x] in _SLOT)))
            for down in self._pending:
                heapq.heappush(todo, (position[down], down))
            self._pending = set()
        return Readiness(tuple(ready), tuple(failed), tuple(skipped))

    def _count(self, task_id: str, old: TaskState | None, new: TaskState, shape: DagShape) -> None:
        was = None if old is None else _SLOT.get(old)
        now = _SLOT.get(new)
        # Unfinished: any state but an end state (``old`` None: first count).
        self._unfinished += (now is None) - (old is not None and was is None)
        if task_id in shape.leaves:
            self._bad_leaves += (new in _BAD) - (old in _BAD)
        if new is TaskState.NONE:
            self._pending.add(task_id)
        else:
            self._pending.discard(task_id)
        if was == now:
            return
        counts, states, pending = self._counts, self._states, self._pending
        for down in shape.downstream[task_id]:
            c = counts[down]
            if was is not None:
                c[was] -= 1
            if now is not None:
                c[now] += 1
            if states[down] is TaskState.NONE:
                pending.add(down)
