"""The heaps that make an admission decision cost O(log n), never a scan of the queue.

Candidates of the same (DAG, pool, pool_slots) form a *group*, a heap in
admission order. Groups of the same (pool, pool_slots) form a *lane*, a heap of
group heads; the top heap holds lane heads. A group whose DAG is full is parked
under the DAG, a lane whose pool cannot fit its pool_slots is parked under the
pool; both stay out of the heaps until a release or a resize of *that* DAG or
pool re-arms them. A DAG has a few groups and a pool a few lanes, so a release
re-arms a bounded number of entries however many candidates wait.

Heap entries are invalidated lazily (tokens), and every entry is one flat tuple
that starts with the four sort fields, so that comparing two entries is a single
tuple compare (a nested key tuple would be scanned twice per compare). The sort
fields a group's or lane's entry carries are a lower bound of its true head,
refreshed when the entry reaches the top; ``key`` on a group or lane is the very
tuple its entry was made from, so "is the entry exact" is one identity test.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Any, TypeAlias

from leoflow.domain.admission.candidate import Candidate

# A waiting candidate: (-priority, run_order, ready_order, key, seq, candidate).
# ``seq`` is unique per offer, so the candidate itself is never compared.
Entry: TypeAlias = tuple[int, float, float, int, int, Candidate]
# A group in its lane: (the head's four sort fields, token, group).
GroupEntry: TypeAlias = "tuple[int, float, float, int, int, Group]"
# A lane in the top heap: (its head group's four sort fields, token, lane).
LaneEntry: TypeAlias = "tuple[int, float, float, int, int, Lane]"

IDLE, IN, PARKED = 0, 1, 2
NO_TOKEN = -1
# Rebuild a heap once stale entries outnumber live ones by this much.
SLACK = 64


class Group:
    """Waiting candidates of one (DAG, pool, pool_slots), a heap in admission order."""

    __slots__ = ("dag_id", "heap", "key", "lane", "live", "state", "token")

    def __init__(self, dag_id: str, lane: Lane) -> None:
        self.dag_id = dag_id
        self.lane = lane
        self.heap: list[Entry] = []
        self.live = 0  # entries that are still waiting; the rest are withdrawn
        self.state = IDLE  # IN its lane, PARKED under its DAG, or IDLE (empty)
        self.token = NO_TOKEN  # token of its one valid entry in the lane heap
        self.key: Entry | None = None  # the candidate entry that entry was made from


class Lane:
    """Groups of one (pool, pool_slots): a heap of their heads."""

    __slots__ = ("demand", "heap", "key", "members", "pool", "state", "token")

    def __init__(self, pool: str, demand: int) -> None:
        self.pool = pool
        self.demand = demand
        self.heap: list[GroupEntry] = []
        self.members = 0  # groups IN this lane
        self.state = IDLE  # IN the top heap, PARKED under its pool, or IDLE (empty)
        self.token = NO_TOKEN
        self.key: GroupEntry | None = None  # the group entry its top entry was made from


def follow(
    source: list[Any], target: list[Any], owner: Group | Lane, tokens: Iterator[int]
) -> bool:
    """Re-key ``owner``'s entry, on top of ``target``, to the head of ``source`` (its
    own heap); if that is empty, drop the entry and make ``owner`` idle (False)."""
    if source:
        head = source[0]
        owner.token = t = next(tokens)
        owner.key = head
        heapq.heapreplace(target, (head[0], head[1], head[2], head[3], t, owner))
        return True
    heapq.heappop(target)
    owner.state, owner.token, owner.key = IDLE, NO_TOKEN, None
    return False


class Lanes:
    """Every group and lane, the top heap and what is parked."""

    __slots__ = (
        "active",
        "groups",
        "lanes",
        "parked_groups",
        "parked_lanes",
        "tokens",
        "top",
        "withdrawn",
    )

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, int], Group] = {}
        self.lanes: dict[tuple[str, int], Lane] = {}
        self.top: list[LaneEntry] = []
        self.active = 0  # lanes IN the top heap
        self.parked_groups: dict[str, set[Group]] = {}  # by DAG
        self.parked_lanes: dict[str, set[Lane]] = {}  # by pool
        self.tokens = itertools.count()
        # Seqs of withdrawn entries still inside a group heap (usually empty, so the
        # hot path never probes a big dict).
        self.withdrawn: set[int] = set()

    def group(self, c: Candidate) -> Group:
        gk = (c.dag_id, c.pool, c.pool_slots)
        g = self.groups.get(gk)
        if g is None:
            lk = (c.pool, c.pool_slots)
            lane = self.lanes.get(lk)
            if lane is None:
                lane = self.lanes[lk] = Lane(c.pool, c.pool_slots)
            g = self.groups[gk] = Group(c.dag_id, lane)
        return g

    def push(self, c: Candidate) -> Entry:
        """Add a waiting candidate to its group (and the group to its lane if it leads)."""
        entry = (-c.priority, c.run_order, c.ready_order, c.key, next(self.tokens), c)
        g = self.group(c)
        g.live += 1
        heapq.heappush(g.heap, entry)
        if g.state == IDLE or (g.state == IN and g.key is not None and entry < g.key):
            self.enter_lane(g, entry)
        return entry

    def drop(self, entry: Entry) -> None:
        """Mark a waiting entry withdrawn; it leaves its heap when it surfaces."""
        c = entry[5]
        g = self.groups[(c.dag_id, c.pool, c.pool_slots)]
        g.live -= 1
        withdrawn = self.withdrawn
        withdrawn.add(entry[4])
        if len(g.heap) > 2 * g.live + SLACK:
            live = []
            for e in g.heap:
                if e[4] in withdrawn:
                    withdrawn.discard(e[4])
                else:
                    live.append(e)
            g.heap[:] = live
            heapq.heapify(g.heap)

    def enter_lane(self, g: Group, head: Entry) -> None:
        """Put ``g`` into its lane (or re-key it there) with lower bound ``head``."""
        lane = g.lane
        if g.state != IN:
            lane.members += 1
            g.state = IN
        g.token = t = next(self.tokens)
        g.key = head
        entry = (head[0], head[1], head[2], head[3], t, g)
        heapq.heappush(lane.heap, entry)
        if len(lane.heap) > 2 * lane.members + SLACK:
            lane.heap[:] = [e for e in lane.heap if e[5].token == e[4]]
            heapq.heapify(lane.heap)
        if lane.state == IDLE or (lane.state == IN and lane.key is not None and entry < lane.key):
            self.activate(lane, entry)

    def activate(self, lane: Lane, key: GroupEntry) -> None:
        """Put ``lane`` into the top heap (or re-key it there) with lower bound ``key``."""
        if lane.state != IN:
            lane.state = IN
            self.active += 1
        lane.token = t = next(self.tokens)
        lane.key = key
        top = self.top
        heapq.heappush(top, (key[0], key[1], key[2], key[3], t, lane))
        if len(top) > 2 * self.active + SLACK:
            top[:] = [e for e in top if e[5].token == e[4]]
            heapq.heapify(top)

    def park_lane(self, lane: Lane) -> None:
        lane.state = PARKED
        lane.token = NO_TOKEN
        self.active -= 1
        parked = self.parked_lanes.get(lane.pool)
        if parked is None:
            self.parked_lanes[lane.pool] = {lane}
        else:
            parked.add(lane)

    def park_group(self, g: Group) -> None:
        g.state = PARKED
        g.token = NO_TOKEN
        parked = self.parked_groups.get(g.dag_id)
        if parked is None:
            self.parked_groups[g.dag_id] = {g}
        else:
            parked.add(g)

    def rearm_dag(self, dag: str) -> None:
        """Return the DAG's parked groups to their lanes (the DAG has room now)."""
        parked = self.parked_groups.pop(dag, None)
        if not parked:
            return
        withdrawn = self.withdrawn
        for g in parked:
            g.state = IDLE
            gheap = g.heap
            while gheap and gheap[0][4] in withdrawn:
                withdrawn.discard(heapq.heappop(gheap)[4])
            if gheap:
                self.enter_lane(g, gheap[0])

    def rearm_pool(self, pool: str, free: int) -> None:
        """Return the pool's parked lanes whose pool_slots fit in ``free`` to the top."""
        parked = self.parked_lanes.get(pool)
        if not parked:
            return
        for lane in [lane for lane in parked if lane.demand <= free]:
            parked.discard(lane)
            lane.state = IDLE
            if lane.heap:
                # The smallest entry, stale or not, is a lower bound of the lane's head.
                self.activate(lane, lane.heap[0])
        if not parked:
            del self.parked_lanes[pool]
