"""``Admission``: the limits, the slots admitted task instances hold, and the walk
that admits, in order, every waiting candidate that fits (see the package note)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from leoflow.domain.admission.candidate import (
    DEFAULT_POOL,
    DEFAULT_POOL_SLOTS,
    Candidate,
    check_limit,
)
from leoflow.domain.admission.lanes import ID_BITS, ID_MASK, IDLE, MASK64, SIGN, Lanes
from leoflow.domain.admission.reasons import REASONS, Occupancy, Reason, WaitReason
from leoflow.domain.admission.reasons import binding as _binding
from leoflow.domain.admission.reasons import explain as _explain


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
        check_limit("parallelism", parallelism)
        check_limit("default_pool_slots", default_pool_slots)
        self._parallelism = parallelism
        self._default_pool_slots = default_pool_slots
        self._pool_size: dict[str, int] = {DEFAULT_POOL: default_pool_slots}
        for name, slots in pools.items():
            check_limit(f"pool {name} slots", slots)
            self._pool_size[name] = slots
        self._dag_limit: dict[str, int] = {}
        self._waiting: dict[int, Candidate] = {}
        self._held: dict[int, Candidate] = {}
        self._dag_used: dict[str, int] = {}
        self._pool_used: dict[str, int] = {}
        self._lanes = Lanes()

    # -- configuration ---------------------------------------------------------

    def set_parallelism(self, n: int) -> None:
        check_limit("parallelism", n)
        self._parallelism = n

    def set_pool(self, name: str, slots: int) -> None:
        """Create or resize a pool. Shrinking below occupancy admits nothing there
        until enough of it is released; held slots are never taken back."""
        check_limit(f"pool {name} slots", slots)
        self._pool_size[name] = slots
        self._lanes.rearm_pool(name, slots - self._pool_used.get(name, 0))

    def remove_pool(self, name: str) -> None:
        """Forget a pool: its waiting candidates wait with ``pool_missing``; its held
        slots stay counted until released. ``default_pool`` returns to its default size."""
        if name == DEFAULT_POOL:
            self.set_pool(name, self._default_pool_slots)
        else:
            self._pool_size.pop(name, None)

    def set_dag_limit(self, dag_id: str, max_active_tasks: int) -> None:
        check_limit(f"DAG {dag_id} max_active_tasks", max_active_tasks)
        self._dag_limit[dag_id] = max_active_tasks
        self._rearm_dag(dag_id)

    def clear_dag_limit(self, dag_id: str) -> None:
        """The DAG is no longer limited (see the package note on unset limits)."""
        self._dag_limit.pop(dag_id, None)
        self._rearm_dag(dag_id)

    # -- the queue -------------------------------------------------------------

    def offer(self, c: Candidate) -> bool:
        """Enqueue a ready task instance. False, and nothing changes, if its key is
        already waiting or held."""
        k = c.key
        if k in self._waiting or k in self._held:
            return False
        self._waiting[k] = c
        self._lanes.push(c)
        return True

    def withdraw(self, key: int) -> bool:
        """Drop a waiting candidate (its run was cancelled). False if it is not waiting;
        a held key is not touched (that is ``release``)."""
        c = self._waiting.pop(key, None)
        if c is None:
            return False
        self._lanes.drop(c)
        return True

    def hold(self, c: Candidate) -> bool:
        """Recovery after a restart: ``c`` already holds its slots (queued or running in
        the store). It counts against every limit, even beyond one that shrank.
        False, and nothing changes, if the key is already held."""
        if c.key in self._held:
            return False
        self.withdraw(c.key)
        self._held[c.key] = c
        self._dag_used[c.dag_id] = self._dag_used.get(c.dag_id, 0) + 1
        self._pool_used[c.pool] = self._pool_used.get(c.pool, 0) + c.pool_slots
        return True

    def admit(self, limit: int | None = None) -> list[Candidate]:
        """Admit, in order, every waiting candidate that fits now (at most ``limit``).

        Each one admitted holds its slots until ``release``. The walk pops the top
        lane, its top group and that group's head; every entry that turns out stale,
        inexact, or blocked by its own DAG or pool is dropped, re-keyed or parked
        on the way, so each candidate costs O(log n) however long the queue is.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        out: list[Candidate] = []
        want = -1 if limit is None else limit
        s = self._lanes
        top, withdrawn, by_gid = s.top, s.withdrawn, s.by_gid
        waiting, held = self._waiting, self._held
        pool_size, pool_used = self._pool_size, self._pool_used
        dag_limit, dag_used = self._dag_limit, self._dag_used
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        cap = self._parallelism
        n_held = len(held)
        while top and n_held < cap and len(out) != want:
            te = top[0]
            lane = by_gid[te & ID_MASK].lane
            if lane.entry is not te:
                heappop(top)
                continue
            pool = lane.pool
            size = pool_size.get(pool)
            if size is None or size - pool_used.get(pool, 0) < lane.demand:
                heappop(top)
                s.park_lane(lane)
                continue
            lheap = lane.heap
            while lheap:
                le = lheap[0]
                g = by_gid[le & ID_MASK]
                if g.entry is not le:
                    heappop(lheap)
                    continue
                gheap = g.heap
                if withdrawn:
                    while gheap and gheap[0] in withdrawn:
                        withdrawn.discard(heappop(gheap))
                if not gheap:
                    heappop(lheap)
                    lane.members -= 1
                    g.state, g.entry = IDLE, None
                    continue
                head = gheap[0]
                if head is not le:
                    g.entry = head
                    heapreplace(lheap, head)
                    continue
                dag = g.dag_id
                cap_dag = dag_limit.get(dag)
                if cap_dag is not None and dag_used.get(dag, 0) >= cap_dag:
                    heappop(lheap)
                    lane.members -= 1
                    s.park_group(g)
                    continue
                break
            else:
                heappop(top)
                lane.state, lane.entry = IDLE, None
                s.active -= 1
                continue
            if le is not te:
                lane.entry = le
                heapreplace(top, le)
                continue
            key = ((heappop(gheap) >> ID_BITS) & MASK64) - SIGN  # key_of, inlined
            c = held[key] = waiting.pop(key)
            g.live -= 1
            n_held += 1
            dag_used[dag] = dag_used.get(dag, 0) + 1
            pool_used[pool] = pool_used.get(pool, 0) + lane.demand
            out.append(c)
            # Re-key g and its lane now, while both sit on top of their heaps: the next
            # round then usually finds them exact and admits without a detour.
            if withdrawn:
                while gheap and gheap[0] in withdrawn:
                    withdrawn.discard(heappop(gheap))
            if gheap:
                g.entry = head = gheap[0]
                heapreplace(lheap, head)
            else:
                heappop(lheap)
                lane.members -= 1
                g.state, g.entry = IDLE, None
            if lheap:
                lane.entry = le = lheap[0]
                heapreplace(top, le)
            else:
                heappop(top)
                lane.state, lane.entry = IDLE, None
                s.active -= 1
        return out

    def release(self, key: int) -> bool:
        """Give back the slots of a held task instance (it reached a terminal state).
        True the first time; False for a key released before, waiting or unknown."""
        c = self._held.pop(key, None)
        if c is None:
            return False
        dag, pool = c.dag_id, c.pool
        dag_used, pool_used = self._dag_used, self._pool_used
        left = dag_used[dag] - 1
        if left:
            dag_used[dag] = left
        else:
            del dag_used[dag]
        left = pool_used[pool] - c.pool_slots
        if left:
            pool_used[pool] = left
        else:
            del pool_used[pool]
        s = self._lanes
        if dag in s.parked_groups:
            self._rearm_dag(dag)
        if pool in s.parked_lanes:
            size = self._pool_size.get(pool)
            if size is not None:
                s.rearm_pool(pool, size - left)
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
        c = self._waiting.get(key)
        if c is None:
            return None
        return _explain(self._occupancy(), c.dag_id, c.pool, c.pool_slots)

    def depth_by_reason(self) -> dict[Reason, int]:
        """Waiting candidates by binding reason, every reason present (for a gauge).

        Costs one step per (DAG, pool, pool_slots) group, not per candidate: every
        candidate of a group is blocked by the same limits.
        """
        depth: dict[Reason, int] = dict.fromkeys(REASONS, 0)
        at = self._occupancy()
        for (dag, pool, demand), g in self._lanes.groups.items():
            if g.live:
                depth[_binding(at, dag, pool, demand)] += g.live
        return depth

    # -- internals -------------------------------------------------------------

    def _occupancy(self) -> Occupancy:
        return Occupancy(
            self._parallelism,
            len(self._held),
            self._pool_size,
            self._pool_used,
            self._dag_limit,
            self._dag_used,
        )

    def _rearm_dag(self, dag: str) -> None:
        cap = self._dag_limit.get(dag)
        if cap is None or self._dag_used.get(dag, 0) < cap:
            self._lanes.rearm_dag(dag)
