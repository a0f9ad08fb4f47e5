"""Admission by example: one test per rule, and every WaitReason message."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from leoflow.domain import dag
from leoflow.domain.admission import (
    DEFAULT_POOL,
    REASONS,
    Admission,
    Candidate,
    WaitReason,
)
from leoflow.domain.runs import runs_to_start


def cand(
    key: int,
    dag_id: str = "d",
    *,
    pool: str = DEFAULT_POOL,
    slots: int = 1,
    priority: int = 0,
    run: float = 0.0,
    ready: float = 0.0,
) -> Candidate:
    return Candidate(key, dag_id, pool, slots, priority, run, ready)


def keys(cs: list[Candidate]) -> list[int]:
    return [c.key for c in cs]


def offered(adm: Admission, *cs: Candidate) -> Admission:
    for c in cs:
        assert adm.offer(c)
    return adm


# -- candidates --------------------------------------------------------------


def test_default_pool_name_matches_the_dag_spec() -> None:
    assert DEFAULT_POOL == dag.DEFAULT_POOL


def test_candidate_needs_at_least_one_pool_slot() -> None:
    with pytest.raises(ValueError, match="pool_slots"):
        cand(1, slots=0)


def test_candidate_orders_must_be_numbers() -> None:
    with pytest.raises(ValueError, match="run_order"):
        cand(1, run=float("nan"))


def test_negative_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="parallelism"):
        Admission(-1, {})
    adm = Admission(1, {})
    with pytest.raises(ValueError, match="pool p"):
        adm.set_pool("p", -1)
    with pytest.raises(ValueError, match="max_active_tasks"):
        adm.set_dag_limit("d", -1)
    with pytest.raises(ValueError, match="limit"):
        adm.admit(limit=-1)


# -- order -------------------------------------------------------------------


def test_order_is_priority_then_run_age_then_readiness_then_key() -> None:
    adm = offered(
        Admission(100, {}),
        cand(6, run=1, ready=1),
        cand(5, run=1, ready=1),
        cand(4, run=1, ready=0),
        cand(3, run=0, ready=9),
        cand(2, priority=1, run=9, ready=9),
        cand(1, priority=-1),
    )
    assert keys(adm.admit()) == [2, 3, 4, 5, 6, 1]


def test_limit_admits_the_first_ones_in_order() -> None:
    adm = offered(Admission(100, {}), *(cand(k, priority=-k) for k in range(5)))
    assert keys(adm.admit(limit=2)) == [0, 1]
    assert adm.admit(limit=0) == []
    assert keys(adm.admit()) == [2, 3, 4]


def test_better_candidate_offered_later_goes_first() -> None:
    adm = offered(Admission(1, {}), cand(1, "a"), cand(2, "b", priority=-1))
    adm.offer(cand(3, "b", priority=5))
    assert keys(adm.admit()) == [3]


# -- limits ------------------------------------------------------------------


def test_parallelism_stops_admission_altogether() -> None:
    adm = offered(Admission(2, {}), cand(1, "a"), cand(2, "b"), cand(3, "c"))
    assert keys(adm.admit()) == [1, 2]
    assert adm.admit() == []
    assert adm.release(1)
    assert keys(adm.admit()) == [3]


def test_dag_max_active_tasks_counts_across_runs() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("d", 2)
    offered(adm, *(cand(k, "d", run=k) for k in range(4)))
    assert keys(adm.admit()) == [0, 1]
    assert adm.dag_occupancy() == {"d": 2}
    adm.release(0)
    assert keys(adm.admit()) == [2]


def test_dag_without_a_limit_is_unlimited() -> None:
    adm = offered(Admission(1000, {}), *(cand(k, "d") for k in range(200)))
    assert len(adm.admit()) == 128  # the default pool's size, not a DAG limit


def test_raising_a_dag_limit_starts_its_waiting_tasks() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("d", 1)
    offered(adm, cand(1), cand(2))
    assert keys(adm.admit()) == [1]
    adm.set_dag_limit("d", 2)
    assert keys(adm.admit()) == [2]


def test_clearing_a_dag_limit_unlimits_it() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("d", 0)
    offered(adm, cand(1), cand(2))
    assert adm.admit() == []
    adm.clear_dag_limit("d")
    assert keys(adm.admit()) == [1, 2]


def test_pool_slots_are_held_per_task() -> None:
    adm = offered(Admission(100, {"w": 4}), *(cand(k, str(k), pool="w", slots=2) for k in range(3)))
    assert keys(adm.admit()) == [0, 1]
    assert adm.pool_occupancy() == {"w": 4}
    adm.release(1)
    assert keys(adm.admit()) == [2]


def test_default_pool_exists_with_default_size() -> None:
    adm = offered(Admission(1000, {}, default_pool_slots=3), *(cand(k, str(k)) for k in range(5)))
    assert keys(adm.admit()) == [0, 1, 2]
    assert adm.pool_sizes()[DEFAULT_POOL] == 3


def test_default_pool_size_defaults_to_128() -> None:
    assert Admission(1, {}).pool_sizes() == {DEFAULT_POOL: 128}


def test_pools_argument_can_resize_the_default_pool() -> None:
    assert Admission(1, {DEFAULT_POOL: 7}).pool_sizes() == {DEFAULT_POOL: 7}


def test_removing_default_pool_restores_its_default_size() -> None:
    adm = Admission(1, {}, default_pool_slots=5)
    adm.set_pool(DEFAULT_POOL, 50)
    adm.remove_pool(DEFAULT_POOL)
    assert adm.pool_sizes() == {DEFAULT_POOL: 5}


def test_unknown_pool_waits_until_the_pool_is_created() -> None:
    adm = offered(Admission(10, {}), cand(1, pool="ghost"), cand(2))
    assert keys(adm.admit()) == [2]
    reason = adm.why(1)
    assert reason is not None and reason.reason == "pool_missing"
    adm.set_pool("ghost", 1)
    assert keys(adm.admit()) == [1]


def test_removed_pool_keeps_held_slots_counted_until_released() -> None:
    adm = offered(Admission(10, {"w": 2}), cand(1, pool="w"), cand(2, pool="w"))
    assert keys(adm.admit(limit=1)) == [1]
    adm.remove_pool("w")
    assert adm.admit() == []
    assert adm.pool_occupancy() == {"w": 1}
    adm.set_pool("w", 1)
    assert adm.admit() == []
    assert adm.release(1)
    assert adm.pool_occupancy() == {}
    assert keys(adm.admit()) == [2]


def test_shrinking_a_pool_below_occupancy_admits_nothing_until_enough_is_released() -> None:
    adm = offered(Admission(10, {"w": 3}), *(cand(k, str(k), pool="w") for k in range(5)))
    assert keys(adm.admit()) == [0, 1, 2]
    adm.set_pool("w", 1)
    adm.release(0)
    assert adm.admit() == []
    adm.release(1)
    assert adm.admit() == []
    adm.release(2)
    assert keys(adm.admit()) == [3]


def test_growing_a_pool_starts_its_waiting_tasks() -> None:
    adm = offered(Admission(10, {"w": 1}), cand(1, "a", pool="w"), cand(2, "b", pool="w"))
    assert keys(adm.admit()) == [1]
    adm.set_pool("w", 2)
    assert keys(adm.admit()) == [2]


def test_parallelism_can_change() -> None:
    adm = offered(Admission(1, {}), cand(1, "a"), cand(2, "b"), cand(3, "c"))
    assert keys(adm.admit()) == [1]
    adm.set_parallelism(3)
    assert adm.parallelism == 3
    assert keys(adm.admit()) == [2, 3]


def test_zero_parallelism_admits_nothing() -> None:
    adm = offered(Admission(0, {}), cand(1))
    assert adm.admit() == []


# -- no head-of-line blocking --------------------------------------------------


def test_a_full_dag_does_not_block_another_dag() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("busy", 1)
    offered(adm, *(cand(k, "busy", priority=10) for k in range(50)), cand(99, "other"))
    assert keys(adm.admit()) == [0, 99]


def test_a_full_pool_does_not_block_another_pool() -> None:
    adm = offered(
        Admission(100, {"w": 1, "x": 5}),
        *(cand(k, str(k), pool="w", priority=10) for k in range(20)),
        cand(99, "z", pool="x"),
    )
    assert keys(adm.admit()) == [0, 99]


def test_a_big_task_does_not_block_a_small_one_of_the_same_pool() -> None:
    adm = offered(
        Admission(100, {"w": 3}),
        cand(1, "a", pool="w", slots=2),
        cand(2, "b", pool="w", slots=2, priority=5),
        cand(3, "c", pool="w", slots=1),
    )
    # 2 (priority 5) takes two slots; 1 needs two but one is free; 3 fits.
    assert keys(adm.admit()) == [2, 3]
    reason = adm.why(1)
    assert reason is not None and reason.reason == "pool_slots"


def test_a_task_too_big_for_its_pool_never_blocks_others() -> None:
    adm = offered(
        Admission(10, {"w": 2}), cand(1, pool="w", slots=3, priority=9), cand(2, pool="w")
    )
    assert keys(adm.admit()) == [2]


def test_release_of_one_dag_does_not_start_a_dag_still_full() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("a", 1)
    offered(adm, cand(1, "a"), cand(2, "a"), cand(3, "b"))
    assert keys(adm.admit()) == [1, 3]
    adm.release(3)
    assert adm.admit() == []
    adm.release(1)
    assert keys(adm.admit()) == [2]


# -- offer / withdraw / hold / release -------------------------------------------


def test_offer_is_a_no_op_for_a_waiting_or_held_key() -> None:
    adm = Admission(10, {})
    assert adm.offer(cand(1))
    assert not adm.offer(cand(1, priority=9))
    assert adm.waiting_count == 1
    adm.admit()
    assert not adm.offer(cand(1))
    assert adm.waiting_count == 0
    assert adm.held_count == 1


def test_offer_after_release_is_a_new_try() -> None:
    adm = offered(Admission(10, {}), cand(1))
    adm.admit()
    adm.release(1)
    assert adm.offer(cand(1))
    assert keys(adm.admit()) == [1]


def test_withdraw_drops_a_waiting_candidate() -> None:
    adm = offered(Admission(10, {}), cand(1), cand(2))
    assert adm.withdraw(1)
    assert not adm.withdraw(1)
    assert not adm.is_waiting(1)
    assert adm.why(1) is None
    assert keys(adm.admit()) == [2]
    assert not adm.withdraw(2)  # held: that is release()
    assert adm.is_held(2)


def test_withdraw_then_offer_changes_a_candidate() -> None:
    adm = offered(Admission(1, {}), cand(1, priority=0), cand(2, priority=5))
    adm.withdraw(1)
    adm.offer(cand(1, priority=9))
    assert keys(adm.admit()) == [1]


def test_many_withdrawals_leave_the_queue_consistent() -> None:
    adm = offered(
        Admission(1000, {}, default_pool_slots=1000), *(cand(k, run=k) for k in range(500))
    )
    for k in range(0, 500, 2):
        assert adm.withdraw(k)
    assert adm.waiting_count == 250
    assert keys(adm.admit()) == list(range(1, 500, 2))


def test_release_is_exactly_once() -> None:
    adm = offered(Admission(10, {"w": 4}), cand(1, pool="w", slots=3))
    adm.admit()
    assert adm.release(1)
    assert not adm.release(1)
    assert not adm.release(42)
    assert adm.pool_occupancy() == {}
    assert adm.dag_occupancy() == {}
    assert adm.held_count == 0


def test_release_of_a_waiting_key_does_nothing() -> None:
    adm = offered(Admission(10, {}), cand(1))
    assert not adm.release(1)
    assert adm.is_waiting(1)


def test_hold_counts_against_every_limit() -> None:
    adm = Admission(2, {"w": 2})
    adm.set_dag_limit("d", 5)
    assert adm.hold(cand(1, "d", pool="w", slots=2))
    offered(adm, cand(2, "d", pool="w"), cand(3, "e"), cand(4, "f"))
    assert keys(adm.admit()) == [3]
    assert adm.pool_occupancy() == {"w": 2, DEFAULT_POOL: 1}
    assert adm.dag_occupancy() == {"d": 1, "e": 1}


def test_hold_may_exceed_limits_that_shrank() -> None:
    adm = Admission(1, {"w": 1})
    adm.set_dag_limit("d", 1)
    for k in range(3):
        assert adm.hold(cand(k, "d", pool="w"))
    assert adm.held_count == 3
    assert adm.pool_occupancy() == {"w": 3}
    assert not adm.hold(cand(0, "d", pool="w"))
    adm.offer(cand(9, "d", pool="w"))
    assert adm.admit() == []
    for k in range(3):
        adm.release(k)
    assert keys(adm.admit()) == [9]


def test_hold_of_a_waiting_key_moves_it_to_held() -> None:
    adm = offered(Admission(10, {}), cand(1))
    assert adm.hold(cand(1))
    assert adm.waiting_count == 0
    assert adm.admit() == []
    assert adm.release(1)


def test_held_candidates_lists_what_holds_slots() -> None:
    adm = offered(Admission(10, {}), cand(1), cand(2))
    adm.hold(cand(3))
    adm.admit(limit=1)
    assert sorted(keys(adm.held_candidates())) == [1, 3]


# -- why -------------------------------------------------------------------------


def test_why_parallelism() -> None:
    adm = offered(Admission(1, {}), cand(1, "a"), cand(2, "b"))
    adm.admit()
    assert adm.why(2) == WaitReason(
        "parallelism", "parallelism: 1 of 1 task slots in use", used=1, limit=1, needed=1
    )


def test_why_dag_max_active_tasks() -> None:
    adm = Admission(100, {})
    adm.set_dag_limit("nightly_sales", 8)
    offered(adm, *(cand(k, "nightly_sales") for k in range(9)))
    adm.admit()
    assert adm.why(8) == WaitReason(
        "dag_max_active_tasks",
        "DAG nightly_sales has 8 of 8 max_active_tasks running",
        used=8,
        limit=8,
        needed=1,
    )


def test_why_pool_slots() -> None:
    adm = offered(
        Admission(100, {"warehouse": 4}),
        *(cand(k, str(k), pool="warehouse") for k in range(4)),
        cand(9, "z", pool="warehouse", slots=2),
    )
    adm.admit()
    assert adm.why(9) == WaitReason(
        "pool_slots",
        "pool warehouse has 0 of 4 slots free; this task needs 2",
        used=4,
        limit=4,
        needed=2,
    )


def test_why_pool_slots_after_a_shrink_reports_no_negative_free_slots() -> None:
    adm = offered(Admission(100, {"w": 4}), *(cand(k, str(k), pool="w") for k in range(5)))
    adm.admit()
    adm.set_pool("w", 2)
    reason = adm.why(4)
    assert reason is not None
    assert reason.message == "pool w has 0 of 2 slots free; this task needs 1"
    assert (reason.used, reason.limit) == (4, 2)


def test_why_pool_missing() -> None:
    adm = offered(Admission(100, {}), cand(1, pool="warehouse", slots=2))
    adm.admit()
    assert adm.why(1) == WaitReason(
        "pool_missing",
        "pool warehouse does not exist; this task needs 2 of its slots",
        used=0,
        limit=None,
        needed=2,
    )


def test_why_pool_too_small() -> None:
    adm = offered(Admission(100, {"warehouse": 4}), cand(1, pool="warehouse", slots=6))
    adm.admit()
    assert adm.why(1) == WaitReason(
        "pool_too_small",
        "pool warehouse has 4 slots in all; this task needs 6 and cannot run until the pool grows",
        used=0,
        limit=4,
        needed=6,
    )


def test_why_ready_when_nothing_blocks() -> None:
    adm = offered(Admission(100, {}), cand(1))
    reason = adm.why(1)
    assert reason is not None
    assert reason.reason == "ready"
    assert reason.message.startswith("nothing blocks it")
    assert reason.also == ()


def test_why_is_none_unless_waiting() -> None:
    adm = offered(Admission(100, {}), cand(1))
    adm.admit()
    assert adm.why(1) is None
    assert adm.why(2) is None


def test_why_reports_every_blocking_limit_binding_first() -> None:
    adm = Admission(2, {"w": 2})
    adm.set_dag_limit("d", 1)
    offered(adm, cand(1, "d", pool="w"), cand(2, "e", pool="w"), cand(3, "d", pool="w"))
    assert keys(adm.admit()) == [1, 2]
    reason = adm.why(3)
    assert reason is not None
    assert [r.reason for r in reason.all] == [
        "dag_max_active_tasks",
        "pool_slots",
        "parallelism",
    ]
    assert reason.message == "DAG d has 1 of 1 max_active_tasks running"
    assert reason.also[0].message == "pool w has 0 of 2 slots free; this task needs 1"
    assert reason.also[1].message == "parallelism: 2 of 2 task slots in use"


def test_why_puts_an_unusable_pool_first() -> None:
    adm = Admission(1, {})
    adm.hold(cand(0, "x"))
    offered(adm, cand(1, pool="ghost"))
    reason = adm.why(1)
    assert reason is not None
    assert [r.reason for r in reason.all] == ["pool_missing", "parallelism"]


def test_depth_by_reason_counts_waiting_by_binding_reason() -> None:
    adm = Admission(3, {"w": 1, "tiny": 1})
    adm.set_dag_limit("full", 1)
    offered(
        adm,
        cand(1, "full", priority=9),
        cand(2, "full"),
        cand(3, "full"),
        cand(4, "a", pool="w", priority=9),
        cand(5, "b", pool="w"),
        cand(6, "c", pool="ghost"),
        cand(7, "c", pool="tiny", slots=2),
        cand(8, "c"),
    )
    assert keys(adm.admit()) == [1, 4, 8]
    offered(adm, cand(9, "z"))
    depth = adm.depth_by_reason()
    assert set(depth) == set(REASONS)
    assert depth == {
        "pool_missing": 1,
        "pool_too_small": 1,
        "dag_max_active_tasks": 2,
        "pool_slots": 1,
        "parallelism": 1,
        "ready": 0,
    }
    adm.release(8)
    assert adm.depth_by_reason()["ready"] == 1
    assert sum(adm.depth_by_reason().values()) == adm.waiting_count


# -- runs_to_start -----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    run_id: str
    run_order: float


def test_runs_to_start_oldest_first_within_the_limit() -> None:
    queued = [Run("c", 3.0), Run("a", 1.0), Run("b", 2.0)]
    assert runs_to_start(queued, running_count=0, max_active_runs=2) == [queued[1], queued[2]]
    assert runs_to_start(queued, running_count=1, max_active_runs=2) == [queued[1]]


def test_runs_to_start_none_when_full_or_over() -> None:
    queued = [Run("a", 1.0)]
    assert runs_to_start(queued, running_count=2, max_active_runs=2) == []
    assert runs_to_start(queued, running_count=5, max_active_runs=2) == []
    assert runs_to_start([], running_count=0, max_active_runs=2) == []


def test_runs_to_start_keeps_given_order_for_equal_ages() -> None:
    queued = [Run("x", 1.0), Run("y", 1.0), Run("z", 1.0)]
    assert runs_to_start(queued, running_count=0, max_active_runs=2) == queued[:2]
