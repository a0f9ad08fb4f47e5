"""A DAG at its limit that frees a slot: its parked groups come back, one candidate
starts, the rest wait (parked again) and start one release at a time, in order."""

from __future__ import annotations

from leoflow.domain.admission import DEFAULT_POOL, Admission, Candidate


def cand(key: int, dag: str, pool: str, priority: int, slots: int = 1) -> Candidate:
    return Candidate(key, dag, pool, slots, priority, 0.0, float(key))


def keys(cs: list[Candidate]) -> list[int]:
    return [c.key for c in cs]


def test_a_full_dag_starts_its_groups_one_release_at_a_time_in_order() -> None:
    adm = Admission(10, {"p": 5, "q": 5})
    adm.set_dag_limit("a", 1)
    pools = (DEFAULT_POOL, "p", "q")
    for k in range(9):  # a's groups: three pools x pool_slots 1 or 2
        adm.offer(cand(k, "a", pools[k % 3], 9 - k, 1 + k % 2))
    adm.offer(cand(100, "b", "p", 0))
    assert keys(adm.admit()) == [0, 100]
    started = [0]
    for _ in range(8):
        assert adm.release(started[-1])
        got = keys(adm.admit())
        assert len(got) == 1
        started.extend(got)
    assert started == list(range(9))
    assert adm.waiting_count == 0


def test_a_group_parked_behind_its_pool_returns_when_the_pool_frees() -> None:
    adm = Admission(10, {"p": 1})
    adm.set_dag_limit("a", 1)
    adm.offer(cand(1, "b", "p", 9))  # fills p
    adm.offer(cand(2, "a", DEFAULT_POOL, 8))
    adm.offer(cand(3, "a", "p", 7))
    adm.offer(cand(4, "a", DEFAULT_POOL, 1))
    assert keys(adm.admit()) == [1, 2]
    assert adm.release(2)  # a has room, but its best candidate's pool is full
    assert keys(adm.admit()) == [4]
    assert adm.release(4)
    assert adm.release(1)  # p frees: a's candidate in p is next
    assert keys(adm.admit()) == [3]
    assert adm.waiting_count == 0
