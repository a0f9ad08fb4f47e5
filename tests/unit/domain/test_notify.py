"""``notify:`` in a DAG file: where it may stand, what it refuses, what is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.notify import Notification, payload

DAG = """\
dag_id: d
notify: [{events: [failure, deadline_missed], webhook_secret: ops}]
defaults:
  notify: [{events: retry, webhook_secret: team, format: slack}]
tasks:
  a: {command: echo}
  b:
    command: echo
    notify: [{events: [success], webhook_secret: mine}]
"""


def test_dag_defaults_and_task_rules() -> None:
    spec = parse_dag(DAG, Path("d.yaml"))
    assert [r.events for r in spec.notify] == [("failure", "deadline_missed")]
    assert [(r.events, r.format) for r in spec.tasks["a"].notify] == [(("retry",), "slack")]
    assert [r.webhook_secret for r in spec.tasks["b"].notify] == ["mine"]


@pytest.mark.parametrize(
    ("rule", "where", "words"),
    [
        ("{events: [boom], webhook_secret: x}", "notify.0.events", "unknown event 'boom'"),
        ("{events: [], webhook_secret: x}", "notify.0.events", "expected a list of events"),
        ("{events: [success]}", "notify.0.webhook_secret", "missing"),
        ("{events: [success], webhook_secret: '../x'}", "notify.0.webhook_secret", "pattern"),
        ("{events: [success], webhook_secret: x, format: xml}", "notify.0.format", "json"),
        ("{events: [success], webhook_secret: x, url: 'http://h'}", "notify.0.url", "unknown"),
    ],
)
def test_bad_rules_name_the_field(rule: str, where: str, words: str) -> None:
    text = f"dag_id: d\nnotify: [{rule}]\ntasks:\n  a: {{command: echo}}\n"
    with pytest.raises(DagFileError) as info:
        parse_dag(text, Path("d.yaml"))
    assert where in str(info.value) and words in str(info.value)


def test_payloads() -> None:
    note = Notification("retry", "d", "r1", "a", 1, "up_for_retry", "exited with code 3", 0.0)
    assert payload("slack", note) == {
        "text": "Leoflow: d: task a of run r1 failed and will be retried (try 1)\n"
        ">exited with code 3"
    }
    assert payload("json", note) == {
        "event": "retry", "dag_id": "d", "run_id": "r1", "task_id": "a", "try_number": 1,
        "state": "up_for_retry", "message": "exited with code 3",
        "at": "1970-01-01T00:00:00+00:00",
    }  # fmt: skip
