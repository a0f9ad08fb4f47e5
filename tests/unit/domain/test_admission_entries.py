"""The one-int heap entries admission orders candidates by compare exactly as the
(-priority, run_order, ready_order, key) tuples they stand for, for every value a
Candidate accepts: negative and signed-zero floats, infinities, 64-bit extremes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leoflow.domain.admission import DEFAULT_POOL, Admission, Candidate
from leoflow.domain.admission.lanes import ID_MASK, entry_of, key_of

INT64 = st.integers(-(2**63), 2**63 - 1)
ORDERS = st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324])
GIDS = st.integers(0, ID_MASK)


def cand(key: int, priority: int, run: float, ready: float) -> Candidate:
    return Candidate(key, "d", DEFAULT_POOL, 1, priority, run, ready)


candidates = st.builds(cand, key=INT64, priority=INT64, run=ORDERS, ready=ORDERS)


def order(c: Candidate, gid: int) -> tuple[int, float, float, int, int]:
    return (-c.priority, c.run_order, c.ready_order, c.key, gid)


@settings(max_examples=2000)
@given(a=candidates, b=candidates, ga=GIDS, gb=GIDS)
def test_entries_compare_as_the_order_tuples(a: Candidate, b: Candidate, ga: int, gb: int) -> None:
    ea, eb = entry_of(a, ga), entry_of(b, gb)
    assert (ea < eb) == (order(a, ga) < order(b, gb))
    assert (ea == eb) == (order(a, ga) == order(b, gb))


@settings(max_examples=500)
@given(c=candidates, gid=GIDS)
def test_an_entry_names_its_key_and_group(c: Candidate, gid: int) -> None:
    e = entry_of(c, gid)
    assert key_of(e) == c.key
    assert e & ID_MASK == gid


def test_signed_zeros_are_the_same_order() -> None:
    assert entry_of(cand(1, 0, -0.0, 0.0), 3) == entry_of(cand(1, 0, 0.0, -0.0), 3)


def test_a_key_or_priority_beyond_64_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="key must be a 64-bit int"):
        cand(2**63, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="priority must be a 64-bit int"):
        cand(1, -(2**63) - 1, 0.0, 0.0)
    with pytest.raises(ValueError, match="priority must be a 64-bit int"):
        Candidate(1, "d", DEFAULT_POOL, 1, 1.5, 0.0, 0.0)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(cs=st.lists(candidates, min_size=1, max_size=40, unique_by=lambda c: c.key))
def test_admission_starts_candidates_in_tuple_order(cs: list[Candidate]) -> None:
    adm = Admission(len(cs), {}, default_pool_slots=len(cs))
    for c in cs:
        assert adm.offer(c)
    want = sorted(cs, key=lambda c: (-c.priority, c.run_order, c.ready_order, c.key))
    assert adm.admit() == want
