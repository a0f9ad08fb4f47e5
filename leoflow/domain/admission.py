"""Admission: which ready task instances may start now, under every limit.

A candidate is a task instance whose upstreams are done. Admitting it makes it
hold three things until it is released (terminal): one of the global
``parallelism`` slots, one of its DAG's ``max_active_tasks`` (across all runs of
the DAG) and ``pool_slots`` slots of its pool.

Order is priority (higher first), then run age (``run_order``, smaller first),
then readiness (``ready_order``, smaller first), then ``key``: deterministic.
``admit()`` is exactly this greedy rule: walk the waiting candidates in that
order, stop when parallelism is full, skip every candidate whose DAG or pool
cannot take it, admit the rest. Nothing blocked by its own DAG or pool ever
holds back a candidate behind it (no head-of-line blocking).

Choices where the contract left room:

* A candidate needing more pool slots than are free does not stop a smaller
  candidate of the same pool behind it from starting (as in Airflow). Packing
  the pool this way keeps it busy; the price is that a big task can starve while
  a stream of small ones keeps the pool from ever having enough room. Reserving
  slots for the big one would idle the pool for an unbounded time instead; the
  operator's remedy for starvation is ``priority`` or a pool of its own.
* A DAG without a limit set through ``set_dag_limit`` is unlimited here: the
  scheduler sets every loaded DAG's ``max_active_tasks`` (whose spec default of
  16 is applied by the DAG loader), so only a DAG unknown to it — its file
  removed while task instances remain — falls back, and no number nobody
  configured should throttle that.
* ``default_pool`` always exists: ``set_pool`` resizes it, ``remove_pool``
  returns it to ``default_pool_slots``. Any other unknown pool name makes its
  candidates wait with ``pool_missing``; they start once the pool is created.
* ``offer`` of a key that is already waiting or held does nothing and returns
  False (the scheduler may re-offer what it sees in state ``scheduled``). To
  change a waiting candidate, ``withdraw`` it and offer it again.
* ``hold`` of a held key does nothing (False); of a waiting key it withdraws it
  and holds it, since the store says it already holds its slots.
* ``why`` lists every limit that blocks, the binding one first: a pool that is
  missing or too small (nothing but an operator can fix it), then the DAG's
  ``max_active_tasks``, then the pool's free slots, then ``parallelism``. The
  narrower limit binds: a release that frees it frees the wider one too. A
  waiting candidate that nothing blocks (offered since the last ``admit()``, or
  left over by its ``limit``) gets the extra reason ``ready``.
* Limits of 0 are allowed and pause: parallelism 0 admits nothing, a DAG limit
  of 0 pauses the DAG, a pool of 0 slots is too small for every task.

Data structures (so that a decision costs O(log n), never a scan of the queue):
candidates of the same (DAG, pool, pool_slots) form a *group*, a heap in
admission order. Groups of the same (pool, pool_slots) form a *lane*, a heap of
group heads; the top heap holds lane heads. A group whose DAG is full is parked
under the DAG, a lane whose pool cannot fit its pool_slots is parked under the
pool; both stay out of the heaps until a release or a resize of *that* DAG or
pool re-arms them. A DAG has a few groups and a pool a few lanes, so a release
re-arms a bounded number of entries however many candidates wait. Heap entries
are invalidated lazily (tokens); the key an entry carries is a lower bound of
its group's or lane's true head, refreshed when it reaches the top.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

# Must equal leoflow.domain.dag.DEFAULT_POOL; repeated here to keep this module
# stdlib-only (a test checks they agree).
DEFAULT_POOL = "default_pool"
DEFAULT_POOL_SLOTS = 128

Reason: TypeAlias = Literal[
    "pool_missing",
    "pool_too_small",
    "dag_max_active_tasks",
    "pool_slots",
    "parallelism",
    "ready",
]
REASONS: tuple[Reason, ...] = (
    "pool_missing",
    "pool_too_small",
    "dag_max_active_tasks",
    "pool_slots",
    "parallelism",
    "ready",
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A ready task instance and what it needs to start."""

    key: int
    dag_id: str
    pool: str
    pool_slots: int
    priority: int
    run_order: float
    ready_order: float

    def __post_init__(self) -> None:
        if self.pool_slots < 1:
            raise ValueError(f"task instance {self.key}: pool_slots must be >= 1")
        if math.isnan(self.run_order) or math.isnan(self.ready_order):
            raise ValueError(f"task instance {self.key}: run_order and ready_order must be numbers")


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a waiting candidate has not started: the binding limit, then the others.

    ``used``/``limit``/``needed`` are the limit's numbers: task slots for
    ``parallelism`` and ``dag_max_active_tasks`` (needed 1), pool slots for the
    pool reasons (``limit`` is None when the pool does not exist).
    """

    reason: Reason
    message: str
    used: int
    limit: int | None
    needed: int
    also: tuple[WaitReason, ...] = field(default=())

    @property
    def all(self) -> tuple[WaitReason, ...]:
        """Every blocking limit, the binding one first."""
        return (self, *self.also)


# A waiting candidate's heap entry, flat so that comparing two is one tuple compare:
# (-priority, run_order, ready_order, key, seq, candidate). ``seq`` is unique per
# offer, so the candidate itself is never compared. An entry is also the sort key
# of its group and lane entries: any entry <= a group's head is a lower bound of it.
_Entry: TypeAlias = tuple[int, float, float, int, int, Candidate]
_SortKey: TypeAlias = _Entry

_IDLE, _IN, _PARKED = 0, 1, 2
_NO_TOKEN = -1


class _Group:
    """Waiting candidates of one (DAG, pool, pool_slots), a heap in admission order."""

    __slots__ = ("dag_id", "heap", "key", "lane", "live", "state", "token")

    def __init__(self, dag_id: str, lane: _Lane) -> None:
        self.dag_id = dag_id
        self.lane = lane
        self.heap: list[_Entry] = []
        self.live = 0  # entries that are still waiting; the rest are withdrawn
        self.state = _IDLE  # _IN its lane, _PARKED under its DAG, or _IDLE (empty)
        self.token = _NO_TOKEN  # token of its one valid entry in the lane heap
        self.key: _SortKey | None = None  # that entry's key, when _IN


class _Lane:
    """Groups of one (pool, pool_slots): a heap of their heads."""

    __slots__ = ("demand", "heap", "key", "members", "pool", "state", "token")

    def __init__(self, pool: str, demand: int) -> None:
        self.pool = pool
        self.demand = demand
        self.heap: list[tuple[_SortKey, int, _Group]] = []
        self.members = 0  # groups _IN this lane
        self.state = _IDLE  # _IN the top heap, _PARKED under its pool, or _IDLE (empty)
        self.token = _NO_TOKEN
        self.key: _SortKey | None = None  # its top-heap entry's key, when _IN


# Rebuild a heap once stale entries outnumber live ones by this much.
_SLACK = 64


def _check_limit(what: str, n: int) -> None:
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")


class Admission:
    """The admission queue and the slots held by admitted task instances.

    Pure and single-threaded: the scheduling loop owns it; nothing here blocks.
    """

    def __init__(
        self,
        parallelism: int,
        pools: Mapping[str, int],
        default_pool_slots: int = DEFAULT_POOL_SLOTS,
    ) -> None:
        _check_limit("parallelism", parallelism)
        _check_limit("default_pool_slots", default_pool_slots)
        self._parallelism = parallelism
        self._default_pool_slots = default_pool_slots
        self._pool_size: dict[str, int] = {DEFAULT_POOL: default_pool_slots}
        for name, slots in pools.items():
            _check_limit(f"pool {name} slots", slots)
            self._pool_size[name] = slots
        self._dag_limit: dict[str, int] = {}
        # key -> its heap entry. Entries leave a group heap when admitted; a withdrawn
        # one stays until it surfaces, marked by its seq here (usually an empty set, so
        # the hot path never probes the big dict above).
        self._waiting: dict[int, _Entry] = {}
        self._withdrawn: set[int] = set()
        self._held: dict[int, Candidate] = {}
        self._dag_used: dict[str, int] = {}
        self._pool_used: dict[str, int] = {}
        self._groups: dict[tuple[str, str, int], _Group] = {}
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._top: list[tuple[_SortKey, int, _Lane]] = []
        self._active_lanes = 0
        self._parked_groups: dict[str, set[_Group]] = {}  # by DAG
        self._parked_lanes: dict[str, set[_Lane]] = {}  # by pool
        self._tokens = itertools.count()

    # -- configuration ---------------------------------------------------------

    def set_parallelism(self, n: int) -> None:
        _check_limit("parallelism", n)
        self._parallelism = n

    def set_pool(self, name: str, slots: int) -> None:
        """Create or resize a pool. Shrinking below occupancy admits nothing there
        until enough of it is released; held slots are never taken back."""
        _check_limit(f"pool {name} slots", slots)
        self._pool_size[name] = slots
        self._rearm_pool(name)

    def remove_pool(self, name: str) -> None:
        """Forget a pool: its waiting candidates wait with ``pool_missing``; its held
        slots stay counted until released. ``default_pool`` returns to its default size."""
        if name == DEFAULT_POOL:
            self.set_pool(name, self._default_pool_slots)
        else:
            self._pool_size.pop(name, None)

    def set_dag_limit(self, dag_id: str, max_active_tasks: int) -> None:
        _check_limit(f"DAG {dag_id} max_active_tasks", max_active_tasks)
        self._dag_limit[dag_id] = max_active_tasks
        self._rearm_dag(dag_id)

    def clear_dag_limit(self, dag_id: str) -> None:
        """The DAG is no longer limited (see the module note on unset limits)."""
        self._dag_limit.pop(dag_id, None)
        self._rearm_dag(dag_id)

    # -- the queue -------------------------------------------------------------

    def offer(self, c: Candidate) -> bool:
        """Enqueue a ready task instance. False, and nothing changes, if its key is
        already waiting or held."""
        k = c.key
        if k in self._waiting or k in self._held:
            return False
        entry = (-c.priority, c.run_order, c.ready_order, k, next(self._tokens), c)
        self._waiting[k] = entry
        g = self._group(c)
        g.live += 1
        heapq.heappush(g.heap, entry)
        if g.state == _IDLE or (g.state == _IN and g.key is not None and entry < g.key):
            self._enter_lane(g, entry)
        return True

    def withdraw(self, key: int) -> bool:
        """Drop a waiting candidate (its run was cancelled). False if it is not waiting;
        a held key is not touched (that is ``release``)."""
        entry = self._waiting.pop(key, None)
        if entry is None:
            return False
        c = entry[5]
        g = self._groups[(c.dag_id, c.pool, c.pool_slots)]
        g.live -= 1
        withdrawn = self._withdrawn
        withdrawn.add(entry[4])
        if len(g.heap) > 2 * g.live + _SLACK:
            live = []
            for e in g.heap:
                if e[4] in withdrawn:
                    withdrawn.discard(e[4])
                else:
                    live.append(e)
            g.heap[:] = live
            heapq.heapify(g.heap)
        return True

    def hold(self, c: Candidate) -> bool:
        """Recovery after a restart: ``c`` already holds its slots (queued or running in
        the store). It counts against every limit, even beyond one that shrank.
        False, and nothing changes, if the key is already held."""
        if c.key in self._held:
            return False
        self.withdraw(c.key)
        self._take(c)
        return True

    def admit(self, limit: int | None = None) -> list[Candidate]:
        """Admit, in order, every waiting candidate that fits now (at most ``limit``).

        Each one admitted holds its slots until ``release``.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        out: list[Candidate] = []
        want = -1 if limit is None else limit
        top = self._top
        waiting = self._waiting
        withdrawn = self._withdrawn
        held = self._held
        pool_size = self._pool_size
        pool_used = self._pool_used
        dag_limit = self._dag_limit
        dag_used = self._dag_used
        tokens = self._tokens
        heappop = heapq.heappop
        heapreplace = heapq.heapreplace
        cap = self._parallelism
        n_held = len(held)
        while top and n_held < cap and len(out) != want:
            lkey, ltok, lane = top[0]
            if lane.token != ltok:
                heappop(top)
                continue
            pool = lane.pool
            size = pool_size.get(pool)
            if size is None or size - pool_used.get(pool, 0) < lane.demand:
                heappop(top)
                self._park_lane(lane)
                continue
            lheap = lane.heap
            while lheap:
                gkey, gtok, g = lheap[0]
                if g.token != gtok:
                    heappop(lheap)
                    continue
                gheap = g.heap
                while gheap and gheap[0][4] in withdrawn:
                    withdrawn.discard(heappop(gheap)[4])
                if not gheap:
                    heappop(lheap)
                    lane.members -= 1
                    g.state = _IDLE
                    g.token = _NO_TOKEN
                    continue
                head = gheap[0]
                if head is not gkey:
                    g.token = t = next(tokens)
                    g.key = head
                    heapreplace(lheap, (head, t, g))
                    continue
                dag = g.dag_id
                cap_dag = dag_limit.get(dag)
                if cap_dag is not None and dag_used.get(dag, 0) >= cap_dag:
                    heappop(lheap)
                    lane.members -= 1
                    g.state = _PARKED
                    g.token = _NO_TOKEN
                    parked = self._parked_groups.get(dag)
                    if parked is None:
                        self._parked_groups[dag] = {g}
                    else:
                        parked.add(g)
                    continue
                break
            else:
                heappop(top)
                lane.state = _IDLE
                lane.token = _NO_TOKEN
                self._active_lanes -= 1
                continue
            if gkey is not lkey:
                lane.token = t = next(tokens)
                lane.key = gkey
                heapreplace(top, (gkey, t, lane))
                continue
            c = heappop(gheap)[5]
            del waiting[c.key]
            g.live -= 1
            held[c.key] = c
            n_held += 1
            dag_used[dag] = dag_used.get(dag, 0) + 1
            pool_used[pool] = pool_used.get(pool, 0) + lane.demand
            out.append(c)
            # Re-key g and its lane now, while both sit on top of their heaps: the next
            # round then usually finds them valid and admits without a detour.
            while gheap and gheap[0][4] in withdrawn:
                withdrawn.discard(heappop(gheap)[4])
            if gheap:
                head = gheap[0]
                g.token = t = next(tokens)
                g.key = head
                heapreplace(lheap, (head, t, g))
            else:
                heappop(lheap)
                lane.members -= 1
                g.state = _IDLE
                g.token = _NO_TOKEN
                g.key = None
            if lheap:
                head = lheap[0][0]
                lane.token = t = next(tokens)
                lane.key = head
                heapreplace(top, (head, t, lane))
            else:
                heappop(top)
                lane.state = _IDLE
                lane.token = _NO_TOKEN
                lane.key = None
                self._active_lanes -= 1
        return out

    def release(self, key: int) -> bool:
        """Give back the slots of a held task instance (it reached a terminal state).
        True the first time; False for a key released before, waiting or unknown."""
        c = self._held.pop(key, None)
        if c is None:
            return False
        dag, pool = c.dag_id, c.pool
        left = self._dag_used[dag] - 1
        if left:
            self._dag_used[dag] = left
        else:
            del self._dag_used[dag]
        left = self._pool_used[pool] - c.pool_slots
        if left:
            self._pool_used[pool] = left
        else:
            del self._pool_used[pool]
        if dag in self._parked_groups:
            self._rearm_dag(dag)
        if pool in self._parked_lanes:
            self._rearm_pool(pool)
        return True

    # -- read-only views -------------------------------------------------------

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    @property
    def held_count(self) -> int:
        return len(self._held)

    def is_waiting(self, key: int) -> bool:
        return key in self._waiting

    def is_held(self, key: int) -> bool:
        return key in self._held

    def held_candidates(self) -> list[Candidate]:
        return list(self._held.values())

    def pool_sizes(self) -> dict[str, int]:
        return dict(self._pool_size)

    def dag_limits(self) -> dict[str, int]:
        return dict(self._dag_limit)

    def pool_occupancy(self) -> dict[str, int]:
        """Pool slots held, by pool name (pools with none held are absent)."""
        return dict(self._pool_used)

    def dag_occupancy(self) -> dict[str, int]:
        """Task slots held, by DAG (DAGs with none held are absent)."""
        return dict(self._dag_used)

    def why(self, key: int) -> WaitReason | None:
        """Why a waiting key has not started; None if it is not waiting."""
        entry = self._waiting.get(key)
        if entry is None:
            return None
        c = entry[5]
        return self._reason(c.dag_id, c.pool, c.pool_slots)

    def depth_by_reason(self) -> dict[Reason, int]:
        """Waiting candidates by binding reason, every reason present (for a gauge).

        Costs one step per (DAG, pool, pool_slots) group, not per candidate: every
        candidate of a group is blocked by the same limits.
        """
        depth: dict[Reason, int] = dict.fromkeys(REASONS, 0)
        for (dag, pool, demand), g in self._groups.items():
            if g.live:
                depth[self._binding(dag, pool, demand)] += g.live
        return depth

    # -- internals -------------------------------------------------------------

    def _blockers(self, dag: str, pool: str, demand: int) -> list[WaitReason]:
        out: list[WaitReason] = []
        pool_used = self._pool_used.get(pool, 0)
        size = self._pool_size.get(pool)
        if size is None:
            out.append(
                WaitReason(
                    "pool_missing",
                    f"pool {pool} does not exist; this task needs {demand} of its slots",
                    pool_used,
                    None,
                    demand,
                )
            )
        elif demand > size:
            out.append(
                WaitReason(
                    "pool_too_small",
                    f"pool {pool} has {size} slots in all; this task needs {demand}"
                    " and cannot run until the pool grows",
                    pool_used,
                    size,
                    demand,
                )
            )
        cap = self._dag_limit.get(dag)
        used = self._dag_used.get(dag, 0)
        if cap is not None and used >= cap:
            out.append(
                WaitReason(
                    "dag_max_active_tasks",
                    f"DAG {dag} has {used} of {cap} max_active_tasks running",
                    used,
                    cap,
                    1,
                )
            )
        if size is not None and demand <= size and size - pool_used < demand:
            out.append(
                WaitReason(
                    "pool_slots",
                    f"pool {pool} has {max(0, size - pool_used)} of {size} slots free;"
                    f" this task needs {demand}",
                    pool_used,
                    size,
                    demand,
                )
            )
        held = len(self._held)
        if held >= self._parallelism:
            out.append(
                WaitReason(
                    "parallelism",
                    f"parallelism: {held} of {self._parallelism} task slots in use",
                    held,
                    self._parallelism,
                    1,
                )
            )
        return out

    def _reason(self, dag: str, pool: str, demand: int) -> WaitReason:
        blockers = self._blockers(dag, pool, demand)
        if not blockers:
            return WaitReason(
                "ready",
                "nothing blocks it: it starts at the next admission round"
                " unless higher-ranked tasks take the room first",
                0,
                None,
                demand,
            )
        first, *rest = blockers
        return WaitReason(
            first.reason, first.message, first.used, first.limit, first.needed, tuple(rest)
        )

    def _binding(self, dag: str, pool: str, demand: int) -> Reason:
        blockers = self._blockers(dag, pool, demand)
        return blockers[0].reason if blockers else "ready"

    def _take(self, c: Candidate) -> None:
        self._held[c.key] = c
        self._dag_used[c.dag_id] = self._dag_used.get(c.dag_id, 0) + 1
        self._pool_used[c.pool] = self._pool_used.get(c.pool, 0) + c.pool_slots

    def _group(self, c: Candidate) -> _Group:
        gk = (c.dag_id, c.pool, c.pool_slots)
        g = self._groups.get(gk)
        if g is None:
            lk = (c.pool, c.pool_slots)
            lane = self._lanes.get(lk)
            if lane is None:
                lane = self._lanes[lk] = _Lane(c.pool, c.pool_slots)
            g = self._groups[gk] = _Group(c.dag_id, lane)
        return g

    def _enter_lane(self, g: _Group, key: _SortKey) -> None:
        """Put ``g`` into its lane (or re-key it there) with lower-bound ``key``."""
        lane = g.lane
        if g.state != _IN:
            lane.members += 1
            g.state = _IN
        g.token = t = next(self._tokens)
        g.key = key
        heapq.heappush(lane.heap, (key, t, g))
        if len(lane.heap) > 2 * lane.members + _SLACK:
            lane.heap[:] = [e for e in lane.heap if e[2].token == e[1]]
            heapq.heapify(lane.heap)
        if lane.state == _IDLE or (lane.state == _IN and lane.key is not None and key < lane.key):
            self._activate(lane, key)

    def _activate(self, lane: _Lane, key: _SortKey) -> None:
        """Put ``lane`` into the top heap (or re-key it there) with lower-bound ``key``."""
        if lane.state != _IN:
            lane.state = _IN
            self._active_lanes += 1
        lane.token = t = next(self._tokens)
        lane.key = key
        top = self._top
        heapq.heappush(top, (key, t, lane))
        if len(top) > 2 * self._active_lanes + _SLACK:
            top[:] = [e for e in top if e[2].token == e[1]]
            heapq.heapify(top)

    def _park_lane(self, lane: _Lane) -> None:
        lane.state = _PARKED
        lane.token = _NO_TOKEN
        self._active_lanes -= 1
        parked = self._parked_lanes.get(lane.pool)
        if parked is None:
            self._parked_lanes[lane.pool] = {lane}
        else:
            parked.add(lane)

    def _rearm_dag(self, dag: str) -> None:
        """Return the DAG's parked groups to their lanes if the DAG has room now."""
        cap = self._dag_limit.get(dag)
        if cap is not None and self._dag_used.get(dag, 0) >= cap:
            return
        parked = self._parked_groups.pop(dag, None)
        if not parked:
            return
        withdrawn = self._withdrawn
        for g in parked:
            g.state = _IDLE
            gheap = g.heap
            while gheap and gheap[0][4] in withdrawn:
                withdrawn.discard(heapq.heappop(gheap)[4])
            if gheap:
                self._enter_lane(g, gheap[0])

    def _rearm_pool(self, pool: str) -> None:
        """Return the pool's parked lanes to the top heap if their pool_slots fit now."""
        parked = self._parked_lanes.get(pool)
        if not parked:
            return
        size = self._pool_size.get(pool)
        if size is None:
            return
        free = size - self._pool_used.get(pool, 0)
        fits = [lane for lane in parked if lane.demand <= free]
        for lane in fits:
            parked.discard(lane)
            lane.state = _IDLE
            if lane.heap:
                # The smallest entry, stale or not, is a lower bound of the lane's head.
                self._activate(lane, lane.heap[0][0])
        if not parked:
            del self._parked_lanes[pool]
