"""Asset schedules: all/any against a reference model (Hypothesis), and what a
malformed schedule says."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.assets.condition import (
    ScheduleError,
    condition_uris,
    is_met,
    parse_condition,
    parse_schedule,
    waiting_for,
)

NAMES = ["a", "b", "c", "d", "e"]
leaf = st.sampled_from(NAMES)
written = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4),
        st.fixed_dictionaries({"all": st.lists(inner, min_size=1, max_size=4)}),
        st.fixed_dictionaries({"any": st.lists(inner, min_size=1, max_size=4)}),
    ),
    max_leaves=12,
).filter(lambda v: not isinstance(v, str))


def reference(value: Any, fresh: set[str]) -> bool:
    """The meaning, written out: a name is met by its event, a list is all of its
    members, ``all``/``any`` are what they say."""
    if isinstance(value, str):
        return value in fresh
    if isinstance(value, list):
        return all(reference(v, fresh) for v in value)
    ((key, members),) = value.items()
    results = [reference(v, fresh) for v in members]
    return all(results) if key == "all" else any(results)


def names_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    members = value if isinstance(value, list) else next(iter(value.values()))
    return set().union(*(names_in(m) for m in members))


@settings(max_examples=400, deadline=None)
@given(written, st.sets(leaf))
def test_is_met_agrees_with_the_reference_model(value: Any, fresh: set[str]) -> None:
    condition = parse_condition(value)
    assert is_met(condition, fresh) == reference(value, fresh)
    assert set(condition_uris(condition)) == names_in(value)
    assert parse_condition(condition) == condition  # the canonical form reads back as itself


@settings(max_examples=300, deadline=None)
@given(written, st.sets(leaf))
def test_waiting_for_names_what_is_missing_and_one_event_each_meets_it(
    value: Any, fresh: set[str]
) -> None:
    condition = parse_condition(value)
    missing = waiting_for(condition, fresh)
    assert (missing == []) == reference(value, fresh)
    assert not set(missing) & fresh
    if missing:  # an event on every asset named there meets the condition
        assert reference(value, fresh | set(missing))


@pytest.mark.parametrize(
    ("value", "loc", "fragment"),
    [
        ({"assets": []}, ("assets",), "at least one"),
        ({"assets": {"any": []}}, ("assets", "any"), "at least one"),
        ({"assets": {"one": ["a"]}}, ("assets",), "{all: [...]} or {any: [...]}"),
        ({"assets": {"all": ["a"], "any": ["b"]}}, ("assets",), "{all: [...]} or {any: [...]}"),
        (
            {"assets": ["a", {"any": ["b", "s3://k:s@x/y"]}]},
            ("assets", "1", "any", "1"),
            "credentials",
        ),
        ({"assets": "a"}, ("assets",), "expected a list"),
        ({"assets": [3]}, ("assets", "0"), "a string"),
        ({"cron": 5}, ("cron",), "cron expression"),
        ({"crons": "* * * * *"}, ("crons",), "unknown field"),
        ({}, (), "assets, cron or both"),
        ([1], (), "expected a cron expression or a mapping"),
    ],
)
def test_malformed_schedules_name_the_field(
    value: Any, loc: tuple[str, ...], fragment: str
) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(value)
    assert info.value.loc == loc
    assert fragment in info.value.message


def test_a_deep_condition_is_refused_not_recursed_without_end() -> None:
    deep: Any = "a"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ScheduleError, match="nest at most"):
        parse_condition(deep)


def test_a_dag_file_s_asset_schedule_errors_carry_file_line_and_field() -> None:
    text = dedent(
        """
        dag_id: marts
        schedule:
          cron: "0 6 * * *"
          assets:
            - orders
            - any: [customers, "postgres://etl:pw@db/x"]
        tasks:
          build: {command: "true"}
        """
    ).lstrip("\n")
    with pytest.raises(DagFileError) as info:
        parse_dag(text, Path("dags/marts.yaml"))
    (problem,) = info.value.problems
    assert problem.field == "schedule.assets.1.any.1" and problem.line == 6
    assert "credentials" in problem.message and "pw" not in problem.message
    spec = parse_dag(text.replace("etl:pw@", ""), Path("dags/marts.yaml"))
    assert spec.schedule == "0 6 * * *"
    assert spec.asset_schedule == {"all": ["orders", {"any": ["customers", "postgres://db/x"]}]}
    assert spec.schedule_assets() == ["orders", "customers", "postgres://db/x"]
