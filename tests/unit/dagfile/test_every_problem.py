"""Validation reports every problem of a file, in the file's order: a key set twice is
one of them, an unknown upstream is reported beside field errors, and a near-miss
field name says which one was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError

FOUR = """\
dag_id: every_problem
max_active_runs: 0
tasks:
  a:
    command: 'true'
    depends_om: [b]
  b:
    command: 'true'
    depends_on: [nope]
    command: 'false'
"""


def problems(text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(DagFileError) as caught:
        parse_dag(text, Path("four.yaml"))
    return [(p.line, p.field, p.message) for p in caught.value.problems]


def test_a_duplicate_key_and_three_other_errors_are_all_reported_in_line_order() -> None:
    assert problems(FOUR) == [
        (2, "max_active_runs", "input should be greater than or equal to 1, got 0"),
        (6, "tasks.a.depends_om", "unknown field; did you mean 'depends_on'?"),
        (9, "tasks.b.depends_on.0", "unknown task 'nope' (tasks in this DAG: a, b)"),
        (
            10,
            "tasks.b.command",
            "duplicate key 'command': also set at line 8; a key may appear once in a mapping",
        ),
    ]


def test_a_duplicate_alone_still_fails_the_file() -> None:
    text = "dag_id: d\ndag_id: e\ntasks:\n  a: {command: 'true'}\n"
    assert problems(text) == [
        (2, "dag_id", "duplicate key 'dag_id': also set at line 1; a key may appear once in "
         "a mapping"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field", "meant"),
    [
        ("dag_id: d\nschedul: '@daily'\ntasks:\n  a: {command: x}\n", "schedul", "schedule"),
        ("dag_id: d\ndefaults: {retires: 1}\ntasks:\n  a: {command: x}\n", "defaults.retires",
         "retries"),
        ("dag_id: d\ntasks:\n  a: {command: x, resources: {limits: {memroy: 1Gi}}}\n",
         "tasks.a.resources.limits.memroy", "memory"),
        ("dag_id: d\npools: {p: {slot: 2}}\ntasks:\n  a: {command: x}\n", "pools.p.slot", "slots"),
    ],
)  # fmt: skip
def test_a_near_miss_field_says_which_was_meant(text: str, field: str, meant: str) -> None:
    found = [p for p in problems(text) if p[1] == field]
    assert found and found[0][2] == f"unknown field; did you mean {meant!r}?", problems(text)


def test_a_field_far_from_any_says_no_guess() -> None:
    text = "dag_id: d\ntasks:\n  a: {command: x, zzzzzz: 1}\n"
    assert problems(text) == [(3, "tasks.a.zzzzzz", "unknown field")]
