"""``trigger_rule`` in a DAG file: per task, in defaults, and a clear error when unknown."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.trigger_rules import TRIGGER_RULES, TriggerRule

PATH = Path("dags/etl/leoflow.yaml")


def parse(text: str) -> object:
    return parse_dag(dedent(text).lstrip("\n"), PATH, LoadOptions())


def test_rule_per_task_and_from_defaults() -> None:
    spec = parse(
        """
        dag_id: etl
        defaults:
          trigger_rule: none_failed
        tasks:
          a: {command: "true"}
          b: {command: "true", depends_on: [a], trigger_rule: all_done}
        """
    )
    tasks = spec.tasks  # type: ignore[attr-defined]
    assert tasks["a"].trigger_rule is TriggerRule.NONE_FAILED
    assert tasks["b"].trigger_rule is TriggerRule.ALL_DONE


def test_default_rule_is_all_success() -> None:
    spec = parse("dag_id: etl\ntasks:\n  a: {command: 'true'}\n")
    assert spec.tasks["a"].trigger_rule is TriggerRule.ALL_SUCCESS  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (
            "dag_id: etl\ntasks:\n  a: {command: 'true', trigger_rule: one_succes}\n",
            "tasks.a.trigger_rule",
        ),
        (
            "dag_id: etl\ndefaults: {trigger_rule: 3}\ntasks:\n  a: {command: 'true'}\n",
            "defaults.trigger_rule",
        ),
    ],
)
def test_unknown_rule_names_the_field_and_the_valid_rules(text: str, field: str) -> None:
    with pytest.raises(DagFileError) as info:
        parse(text)
    problems = [p for p in info.value.problems if p.field == field]
    assert len(problems) == 1, str(info.value)
    message = problems[0].message
    assert "unknown trigger rule" in message
    assert all(rule in message for rule in TRIGGER_RULES), message
    assert str(PATH) in str(info.value)
