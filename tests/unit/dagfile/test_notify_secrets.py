"""A notify: webhook secret that does not exist is a load error naming the file, the
line, the field path and the secret; checked only when the secrets are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.dagfile.problems import DagFileError

DAG = """\
dag_id: alerts
notify:
  - {events: [failure], webhook_secret: run_hook}
defaults:
  notify:
    - {events: [retry], webhook_secret: team_hook}
tasks:
  a:
    command: echo a
  b:
    command: echo b
    notify:
      - {events: [success], webhook_secret: ok_hook}
      - {events: [failure], webhook_secret: b_hook, format: slack}
"""

WHERE = "the secrets directory /s (LEOFLOW_SECRETS_DIR)"


def _load(known: set[str] | None) -> None:
    parse_dag(DAG, Path("dags/alerts.yaml"), LoadOptions(known_secrets=known, secrets_where=WHERE))


def test_every_missing_webhook_secret_is_named_where_it_was_written() -> None:
    with pytest.raises(DagFileError) as caught:
        _load({"ok_hook"})
    lines = str(caught.value).splitlines()
    assert lines == [
        f"dags/alerts.yaml:3: notify.0.webhook_secret: webhook secret 'run_hook' does not "
        f"exist in {WHERE}: create it, or name a secret that exists",
        f"dags/alerts.yaml:6: defaults.notify.0.webhook_secret: webhook secret 'team_hook' "
        f"does not exist in {WHERE}: create it, or name a secret that exists",
        f"dags/alerts.yaml:14: tasks.b.notify.1.webhook_secret: webhook secret 'b_hook' does "
        f"not exist in {WHERE}: create it, or name a secret that exists",
    ]


def test_a_dag_whose_secrets_all_exist_loads() -> None:
    _load({"run_hook", "team_hook", "ok_hook", "b_hook"})


def test_unknown_secrets_are_not_checked() -> None:
    _load(None)  # Pro's split API: the secrets are where it cannot see them
