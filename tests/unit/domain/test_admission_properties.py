"""Admission against a plain reference model, under random operations.

The model is the rule written as directly as possible: sort every waiting
candidate, stop at parallelism, skip what its DAG or pool cannot take. The
machine checks that ``Admission`` (heaps, parked groups, lazy entries) decides
exactly the same, and that its bookkeeping never drifts.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from leoflow.domain.admission import DEFAULT_POOL, Admission, Candidate

DAGS = ("a", "b", "c")
POOLS = (DEFAULT_POOL, "p", "q", "ghost")  # ghost does not exist until set_pool creates it
DEFAULT_SLOTS = 6

keys = st.integers(0, 24)
candidates = st.builds(
    Candidate,
    key=keys,
    dag_id=st.sampled_from(DAGS),
    # Mostly the default pool, so that lanes hold several DAGs' groups.
    pool=st.sampled_from((DEFAULT_POOL, DEFAULT_POOL, *POOLS)),
    pool_slots=st.sampled_from([1, 1, 1, 2, 3]),
    priority=st.integers(0, 2),
    run_order=st.integers(0, 3).map(float),
    ready_order=st.integers(0, 3).map(float),
)


def sort_key(c: Candidate) -> tuple[int, float, float, int]:
    return (-c.priority, c.run_order, c.ready_order, c.key)


class Model:
    """The admission rule, with no cleverness."""

    def __init__(self, parallelism: int, pools: dict[str, int]) -> None:
        self.parallelism = parallelism
        self.pools = {DEFAULT_POOL: DEFAULT_SLOTS, **pools}
        self.dag_limits: dict[str, int] = {}
        self.waiting: dict[int, Candidate] = {}
        self.held: dict[int, Candidate] = {}

    def dag_used(self) -> Counter[str]:
        return Counter(c.dag_id for c in self.held.values())

    def pool_used(self) -> Counter[str]:
        used: Counter[str] = Counter()
        for c in self.held.values():
            used[c.pool] += c.pool_slots
        return used

    def blockers(self, c: Candidate) -> list[str]:
        pool_used, dag_used = self.pool_used(), self.dag_used()
        size = self.pools.get(c.pool)
        out: list[str] = []
        if size is None:
            out.append("pool_missing")
        elif c.pool_slots > size:
            out.append("pool_too_small")
        limit = self.dag_limits.get(c.dag_id)
        if limit is not None and dag_used[c.dag_id] >= limit:
            out.append("dag_max_active_tasks")
        if size is not None and c.pool_slots <= size < pool_used[c.pool] + c.pool_slots:
            out.append("pool_slots")
        if len(self.held) >= self.parallelism:
            out.append("parallelism")
        return out

    def admit(self, limit: int | None) -> list[Candidate]:
        out: list[Candidate] = []
        for c in sorted(self.waiting.values(), key=sort_key):
            if limit is not None and len(out) >= limit:
                break
            if len(self.held) >= self.parallelism:
                break
            if self.blockers(c):
                continue
            del self.waiting[c.key]
            self.held[c.key] = c
            out.append(c)
        return out

    def can_ever_run(self, c: Candidate) -> bool:
        size = self.pools.get(c.pool)
        return (
            self.parallelism > 0
            and size is not None
            and c.pool_slots <= size
            and self.dag_limits.get(c.dag_id, 1) > 0
        )


class AdmissionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        pools = {"p": 3, "q": 4}
        self.adm = Admission(5, pools, default_pool_slots=DEFAULT_SLOTS)
        self.model = Model(5, pools)

    # -- operations ------------------------------------------------------------

    @rule(c=candidates)
    def offer(self, c: Candidate) -> None:
        fresh = c.key not in self.model.waiting and c.key not in self.model.held
        assert self.adm.offer(c) == fresh
        if fresh:
            self.model.waiting[c.key] = c

    @rule(cs=st.lists(candidates, min_size=2, max_size=8))
    def offer_many(self, cs: list[Candidate]) -> None:
        for c in cs:
            self.offer(c)

    @rule(key=keys)
    def withdraw(self, key: int) -> None:
        assert self.adm.withdraw(key) == (key in self.model.waiting)
        self.model.waiting.pop(key, None)

    @rule(c=candidates)
    def hold(self, c: Candidate) -> None:
        fresh = c.key not in self.model.held
        assert self.adm.hold(c) == fresh
        if fresh:
            self.model.waiting.pop(c.key, None)
            self.model.held[c.key] = c

    @rule(limit=st.none() | st.integers(0, 4))
    def admit(self, limit: int | None) -> None:
        before_dag, before_pool = self.model.dag_used(), self.model.pool_used()
        before_total = len(self.model.held)
        got = self.adm.admit(limit)
        expected = self.model.admit(limit)
        # Same choice, same order: priority order within what fits, no head-of-line blocking.
        assert got == expected
        # Admissions never push a counter past its limit (holds and shrinks may have).
        after_dag, after_pool = self.model.dag_used(), self.model.pool_used()
        for dag, used in after_dag.items():
            if used > before_dag[dag]:
                assert used <= self.model.dag_limits.get(dag, used)
        for pool, used in after_pool.items():
            if used > before_pool[pool]:
                assert used <= self.model.pools[pool]
        if len(self.model.held) > before_total:
            assert len(self.model.held) <= self.model.parallelism
        if limit is None:
            # Whatever still waits is blocked by a limit of its own, never by another's.
            for key in self.model.waiting:
                reason = self.adm.why(key)
                assert reason is not None and reason.reason != "ready"

    @rule(key=keys, then_admit=st.booleans())
    def release(self, key: int, then_admit: bool) -> None:
        assert self.adm.release(key) == (key in self.model.held)
        self.model.held.pop(key, None)
        assert not self.adm.release(key)
        self.maybe_admit(then_admit)

    @rule(name=st.sampled_from(POOLS), slots=st.integers(0, 6), then_admit=st.booleans())
    def set_pool(self, name: str, slots: int, then_admit: bool) -> None:
        self.adm.set_pool(name, slots)
        self.model.pools[name] = slots
        self.maybe_admit(then_admit)

    @rule(name=st.sampled_from(POOLS), then_admit=st.booleans())
    def remove_pool(self, name: str, then_admit: bool) -> None:
        self.adm.remove_pool(name)
        if name == DEFAULT_POOL:
            self.model.pools[name] = DEFAULT_SLOTS
        else:
            self.model.pools.pop(name, None)
        self.maybe_admit(then_admit)

    @rule(dag=st.sampled_from(DAGS), limit=st.integers(0, 3), then_admit=st.booleans())
    def set_dag_limit(self, dag: str, limit: int, then_admit: bool) -> None:
        self.adm.set_dag_limit(dag, limit)
        self.model.dag_limits[dag] = limit
        self.maybe_admit(then_admit)

    @rule(dag=st.sampled_from(DAGS), then_admit=st.booleans())
    def clear_dag_limit(self, dag: str, then_admit: bool) -> None:
        self.adm.clear_dag_limit(dag)
        self.model.dag_limits.pop(dag, None)
        self.maybe_admit(then_admit)

    @rule(n=st.integers(0, 8), then_admit=st.booleans())
    def set_parallelism(self, n: int, then_admit: bool) -> None:
        self.adm.set_parallelism(n)
        self.model.parallelism = n
        self.maybe_admit(then_admit)

    def maybe_admit(self, then_admit: bool) -> None:
        """The scheduler admits right after a change; so do some of these steps."""
        if then_admit:
            self.admit(None)

    @rule()
    def drain(self) -> None:
        """Release everything, admit until nothing changes: every candidate that can
        ever run does run, exactly once; what remains can never run as configured."""
        for key in list(self.model.held):
            assert self.adm.release(key)
            del self.model.held[key]
        started: Counter[int] = Counter()
        for _ in range(len(self.model.waiting) + 1):
            batch = self.adm.admit()
            assert batch == self.model.admit(None)
            if not batch:
                break
            for c in batch:
                started[c.key] += 1
                assert self.adm.release(c.key)
                del self.model.held[c.key]
        assert all(n == 1 for n in started.values())
        for c in self.model.waiting.values():
            assert not self.model.can_ever_run(c)
            reason = self.adm.why(c.key)
            assert reason is not None
            permanent = {"pool_missing", "pool_too_small", "dag_max_active_tasks"}
            if self.model.parallelism == 0:
                permanent.add("parallelism")
            assert reason.reason in permanent

    # -- invariants ------------------------------------------------------------

    @invariant()
    def slots_are_conserved(self) -> None:
        assert self.adm.held_count == len(self.model.held)
        assert self.adm.waiting_count == len(self.model.waiting)
        assert {c.key: c for c in self.adm.held_candidates()} == self.model.held
        assert self.adm.pool_occupancy() == {k: v for k, v in self.model.pool_used().items() if v}
        assert self.adm.dag_occupancy() == dict(self.model.dag_used())

    @invariant()
    def why_names_exactly_the_blocking_limits(self) -> None:
        for c in self.model.waiting.values():
            reason = self.adm.why(c.key)
            assert reason is not None
            expected = self.model.blockers(c) or ["ready"]
            assert [r.reason for r in reason.all] == expected
        for key in self.model.held:
            assert self.adm.why(key) is None

    @invariant()
    def depth_by_reason_adds_up(self) -> None:
        depth = self.adm.depth_by_reason()
        assert sum(depth.values()) == len(self.model.waiting)
        expected = Counter(
            (self.model.blockers(c) or ["ready"])[0] for c in self.model.waiting.values()
        )
        assert {k: v for k, v in depth.items() if v} == dict(expected)


AdmissionMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAdmissionMachine = AdmissionMachine.TestCase


# A bigger, flatter workload than the machine reaches: many candidates, many DAGs,
# cycles of admit and partial release, still decided exactly like the model.
@pytest.mark.slow  # CPU-heavy: left out of make test-fast
@settings(max_examples=100, deadline=None)
@given(
    cs=st.lists(
        st.builds(
            Candidate,
            key=st.integers(0, 10_000),
            dag_id=st.sampled_from([f"d{i}" for i in range(6)]),
            pool=st.sampled_from([DEFAULT_POOL, DEFAULT_POOL, "p", "q", "ghost"]),
            pool_slots=st.integers(1, 4),
            priority=st.integers(-3, 3),
            run_order=st.floats(0, 100, allow_nan=False),
            ready_order=st.floats(0, 100, allow_nan=False),
        ),
        min_size=10,
        max_size=150,
        unique_by=lambda c: c.key,
    ),
    parallelism=st.integers(1, 20),
    dag_limits=st.dictionaries(st.sampled_from([f"d{i}" for i in range(6)]), st.integers(0, 4)),
    release_every=st.integers(1, 3),
)
def test_large_workloads_match_the_model(
    cs: list[Candidate], parallelism: int, dag_limits: dict[str, int], release_every: int
) -> None:
    pools = {"p": 3, "q": 6}
    adm = Admission(parallelism, pools, default_pool_slots=8)
    model = Model(parallelism, pools)
    model.pools[DEFAULT_POOL] = 8
    for dag, limit in dag_limits.items():
        adm.set_dag_limit(dag, limit)
        model.dag_limits[dag] = limit
    for c in cs:
        adm.offer(c)
        model.waiting[c.key] = c
    # Each round releases at least one held task, so this ends within 2n + 1 rounds.
    for _ in range(2 * len(cs) + 1):
        got = adm.admit()
        assert got == model.admit(None)
        if not model.held:
            break
        for i, key in enumerate(sorted(model.held)):
            if i % release_every == 0:
                assert adm.release(key)
                del model.held[key]
    assert not model.held
    # Nothing that could run was left behind.
    for c in model.waiting.values():
        assert not model.can_ever_run(c)


# The benchmark's steady state in miniature: a few DAGs, one of them busy, at small
# limits, pools that fill, and every step releasing some held tasks, offering new
# ones and admitting. This keeps DAGs filling and emptying while their groups wait
# in lanes and parked lanes, a churn the machine above rarely reaches.
@settings(max_examples=60, deadline=None)
@given(
    rnd=st.randoms(use_true_random=False),
    parallelism=st.integers(2, 12),
    batch=st.integers(1, 4),
    dag_limits=st.lists(st.integers(1, 3), min_size=3, max_size=3),
)
def test_steady_churn_under_dag_and_pool_limits_matches_the_model(
    rnd: random.Random, parallelism: int, batch: int, dag_limits: list[int]
) -> None:
    pools = {"p": 2, "q": 3, "r": 1}
    adm = Admission(parallelism, pools, default_pool_slots=4)
    model = Model(parallelism, pools)
    model.pools[DEFAULT_POOL] = 4
    for dag, limit in zip("abc", dag_limits, strict=True):
        adm.set_dag_limit(dag, limit)
        model.dag_limits[dag] = limit
    key = 0
    for _ in range(100):
        for _ in range(batch):
            if model.held and rnd.random() < 0.8:
                k = rnd.choice(sorted(model.held))
                assert adm.release(k)
                del model.held[k]
            c = Candidate(
                key=key,
                dag_id=rnd.choices("abcd", (6, 2, 1, 1))[0],
                pool=rnd.choice((DEFAULT_POOL, "p", "q", "r")),
                pool_slots=rnd.choice((1, 1, 1, 2)),
                priority=rnd.randrange(4),
                run_order=float(rnd.randrange(key // 5 + 1)),
                ready_order=float(key),
            )
            key += 1
            assert adm.offer(c)
            model.waiting[c.key] = c
        assert adm.admit() == model.admit(None)
    assert adm.waiting_count == len(model.waiting)
