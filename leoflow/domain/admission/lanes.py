"""The heaps that make an admission decision cost O(log n), never a scan of the queue.

Candidates of the same (DAG, pool, pool_slots) form a *group*, a heap in
admission order. Groups of the same (pool, pool_slots) form a *lane*, a heap of
group heads; the top heap holds lane heads. A group whose DAG is full is parked
under the DAG, a lane whose pool cannot fit its pool_slots is parked under the
pool; both stay out of the heaps until a release or a resize of *that* DAG or
pool re-arms them. A DAG has a few groups and a pool a few lanes, so a release
re-arms a bounded number of entries however many candidates wait.

Every heap entry is one plain int, made once per offer (``entry_of``): the
candidate's place in admission order with its group's id in the low bits. One
int serves all three heaps: a group heap holds its candidates' ints, a lane heap
its groups' heads' ints, the top heap its lanes' heads' ints; the owner of an
entry is ``by_gid[entry & ID_MASK]`` (a lane through its group). Comparing two
entries is one integer compare that reads one object each; a tuple of sort
fields read the tuple and each field, which made a decision dearer as the queue
outgrew the cache, and re-keying an entry built nothing.

Entries are invalidated lazily: an entry in a lane or the top heap is valid
while its owner's ``entry`` is that very object (an identity test), and what it
says is a lower bound of its owner's head, refreshed when it reaches the top. A
valid object may sit twice in one heap (a group re-keyed back to an entry it had
left behind); processing either copy changes or clears the owner's ``entry``, so
the other turns stale.

Measured and not kept (CPU time per decision unchanged within noise): holding a
re-armed DAG's groups PENDING on a parked lane until it re-arms (fewer bytecodes
at batch 1, more at batch 64), and parking a full DAG's re-armed groups eagerly.
"""

from __future__ import annotations

import heapq
import struct

from leoflow.domain.admission.candidate import Candidate

IDLE, IN, PARKED = 0, 1, 2
# Rebuild a heap once stale entries outnumber live ones by this much.
SLACK = 64
ID_BITS = 32
ID_MASK = (1 << ID_BITS) - 1
SIGN = 1 << 63
MASK64 = (1 << 64) - 1
_pack_floats = struct.Struct(">QddQI").pack
_pack_ints = struct.Struct(">QQQQI").pack
_float_bits = struct.Struct(">d").pack
_from_bytes = int.from_bytes


def _ordered_bits(x: float) -> int:
    """A float's IEEE bits, turned so that they order as the float does."""
    bits = _from_bytes(_float_bits(x + 0.0), "big")
    return bits ^ MASK64 if bits & SIGN else bits | SIGN


def entry_of(c: Candidate, gid: int) -> int:
    """``c``'s heap entry: (-priority, run_order, ready_order, key, gid), as 32
    big-endian bytes read as one unsigned int, so that entries compare exactly as
    those tuples do (``Candidate`` keeps priority and key within 64 bits).

    For a float x >= 0 the IEEE bits of ``-(x + 0.0)`` are x's bits with the sign
    bit set, which order as x does among such floats, and ``+ 0.0`` makes -0.0 the
    same as 0.0 as it is for floats; a negative x (rare) takes ``_ordered_bits``,
    whose flipped bits sort below every non-negative float's.
    """
    run, ready = c.run_order, c.ready_order
    if run >= 0.0 and ready >= 0.0:
        raw = _pack_floats(SIGN - 1 - c.priority, -(run + 0.0), -(ready + 0.0), c.key + SIGN, gid)
    else:
        raw = _pack_ints(
            SIGN - 1 - c.priority, _ordered_bits(run), _ordered_bits(ready), c.key + SIGN, gid
        )
    return _from_bytes(raw, "big")


def key_of(entry: int) -> int:
    """The task instance key inside an entry."""
    return ((entry >> ID_BITS) & MASK64) - SIGN


class Group:
    """Waiting candidates of one (DAG, pool, pool_slots), a heap of their entries."""

    __slots__ = ("dag_id", "entry", "gid", "heap", "lane", "live", "state")

    def __init__(self, dag_id: str, lane: Lane, gid: int) -> None:
        self.dag_id = dag_id
        self.lane = lane
        self.gid = gid
        self.heap: list[int] = []
        self.live = 0  # entries that are still waiting; the rest are withdrawn
        self.state = IDLE  # IN its lane, PARKED under its DAG, or IDLE (empty)
        self.entry: int | None = None  # its valid entry in the lane heap, when IN


class Lane:
    """Groups of one (pool, pool_slots): a heap of their heads."""

    __slots__ = ("demand", "entry", "heap", "members", "pool", "state")

    def __init__(self, pool: str, demand: int) -> None:
        self.pool = pool
        self.demand = demand
        self.heap: list[int] = []
        self.members = 0  # groups IN this lane
        self.state = IDLE  # IN the top heap, PARKED under its pool, or IDLE (empty)
        self.entry: int | None = None  # its valid entry in the top heap, when IN


class Lanes:
    """Every group and lane, the top heap and what is parked."""

    __slots__ = (
        "active",
        "by_gid",
        "groups",
        "lanes",
        "parked_groups",
        "parked_lanes",
        "top",
        "withdrawn",
    )

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, int], Group] = {}
        self.lanes: dict[tuple[str, int], Lane] = {}
        self.by_gid: list[Group] = []  # an entry's low bits index this
        self.top: list[int] = []
        self.active = 0  # lanes IN the top heap
        self.parked_groups: dict[str, set[Group]] = {}  # by DAG
        self.parked_lanes: dict[str, set[Lane]] = {}  # by pool
        # Entries withdrawn but still inside a group heap (usually empty, so the hot
        # path only tests its truth).
        self.withdrawn: set[int] = set()

    def new_group(self, c: Candidate) -> Group:
        lk = (c.pool, c.pool_slots)
        lane = self.lanes.get(lk)
        if lane is None:
            lane = self.lanes[lk] = Lane(c.pool, c.pool_slots)
        g = Group(c.dag_id, lane, len(self.by_gid))
        self.groups[(c.dag_id, c.pool, c.pool_slots)] = g
        self.by_gid.append(g)
        return g

    def push(self, c: Candidate) -> None:
        """Add a waiting candidate to its group (and the group to its lane if it leads)."""
        g = self.groups.get((c.dag_id, c.pool, c.pool_slots)) or self.new_group(c)
        e = entry_of(c, g.gid)
        g.live += 1
        withdrawn = self.withdrawn
        if withdrawn and e in withdrawn:
            # Offered again exactly as it was withdrawn: that entry is still in g's
            # heap (so g's entry, if IN, is still a lower bound of it); revive it.
            withdrawn.discard(e)
            return
        heapq.heappush(g.heap, e)
        state = g.state
        if state == IDLE or (state == IN and e < g.entry):  # type: ignore[operator]
            self.enter_lane(g, e)

    def drop(self, c: Candidate) -> None:
        """Mark a waiting candidate's entry withdrawn; it leaves its heap when it
        surfaces (rare: the entry is made again rather than kept per candidate)."""
        g = self.groups[(c.dag_id, c.pool, c.pool_slots)]
        g.live -= 1
        withdrawn = self.withdrawn
        withdrawn.add(entry_of(c, g.gid))
        if len(g.heap) > 2 * g.live + SLACK:
            live = []
            for x in g.heap:
                if x in withdrawn:
                    withdrawn.discard(x)
                else:
                    live.append(x)
            g.heap[:] = live
            heapq.heapify(g.heap)

    def enter_lane(self, g: Group, head: int) -> None:
        """Put ``g`` into its lane (or re-key it there) with lower bound ``head``."""
        lane = g.lane
        if g.state != IN:
            lane.members += 1
            g.state = IN
        g.entry = head
        lheap = lane.heap
        heapq.heappush(lheap, head)
        if len(lheap) > 2 * lane.members + SLACK:
            by_gid = self.by_gid
            lheap[:] = [x for x in lheap if by_gid[x & ID_MASK].entry is x]
            heapq.heapify(lheap)
        state = lane.state
        if state == IDLE or (state == IN and head < lane.entry):  # type: ignore[operator]
            self.activate(lane, head)

    def activate(self, lane: Lane, key: int) -> None:
        """Put ``lane`` into the top heap (or re-key it there) with lower bound ``key``."""
        if lane.state != IN:
            lane.state = IN
            self.active += 1
        lane.entry = key
        top = self.top
        heapq.heappush(top, key)
        if len(top) > 2 * self.active + SLACK:
            by_gid = self.by_gid
            top[:] = [x for x in top if by_gid[x & ID_MASK].lane.entry is x]
            heapq.heapify(top)

    def park_lane(self, lane: Lane) -> None:
        lane.state = PARKED
        lane.entry = None
        self.active -= 1
        parked = self.parked_lanes.get(lane.pool)
        if parked is None:
            self.parked_lanes[lane.pool] = {lane}
        else:
            parked.add(lane)

    def park_group(self, g: Group) -> None:
        g.state = PARKED
        g.entry = None
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
            if withdrawn:
                while gheap and gheap[0] in withdrawn:
                    withdrawn.discard(heapq.heappop(gheap))
            if gheap:
                self.enter_lane(g, gheap[0])

    def rearm_pool(self, pool: str, free: int) -> None:
        """Return the pool's parked lanes whose pool_slots fit in ``free`` to the top."""
        parked = self.parked_lanes.get(pool)
        if not parked:
            return
        for lane in tuple(parked):
            if lane.demand <= free:
                parked.discard(lane)
                lane.state = IDLE
                if lane.heap:
                    # The smallest entry, stale or not, is a lower bound of the lane's head.
                    self.activate(lane, lane.heap[0])
        if not parked:
            del self.parked_lanes[pool]
