"""A task needing more slots than its pool has is told at load, where the pool is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.dagfile.problems import DagFileError

DAG = "dag_id: d\ntasks:\n  a: {command: 'true', pool: small, pool_slots: 5}\n"


def test_more_slots_than_the_pool_has_is_a_load_error_naming_the_field() -> None:
    options = LoadOptions(known_pools={"small"}, pool_sizes={"small": 4})
    with pytest.raises(DagFileError) as info:
        parse_dag(DAG, Path("d.yaml"), options)
    (problem,) = info.value.problems
    assert (problem.field, problem.line) == ("tasks.a.pool_slots", 3)
    assert "needs 5 slots of pool 'small', which has 4 in all" in problem.message
    assert "leoflow pools set small 5" in problem.message


def test_a_pool_big_enough_or_of_unknown_size_loads() -> None:
    parse_dag(DAG, Path("d.yaml"), LoadOptions(known_pools={"small"}, pool_sizes={"small": 5}))
    parse_dag(DAG, Path("d.yaml"), LoadOptions(known_pools={"small"}))
