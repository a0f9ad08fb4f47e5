"""A stored spec read back shares its tasks' equal parts and is still the same spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.domain.catalogue import CatalogueEntry, parse_spec
from leoflow.domain.dag import DagSpec

_DAG = """
dag_id: shared
tasks:
  a: {command: ["true"]}
  b: {command: ["true"], depends_on: [a]}
  c:
    command: ["true"]
    resources: {limits: {cpu: "2"}}
  d:
    command: ["true"]
    resources: {limits: {cpu: "2"}}
  e:
    command: ["true"]
    execution: {node_selector: {disk: ssd}}
"""


_RICH = """
dag_id: rich
schedule: "0 3 * * *"
timezone: Europe/Paris
start_date: 2024-05-01T00:00:00+02:00
catchup: true
deadline: 2h
run_timeout: 90m
tags: [nightly, etl]
notify:
  - {events: [failure], webhook_secret: run_hook}
tasks:
  up:
    command: "echo up"
    env: {A: "1"}
    retries: 2
    retry_delay: 30s
    timeout: 5m
    pool: small
    pool_slots: 2
    priority: 7
    secrets: [db_password]
    trigger_rule: all_done
    resources: {requests: {memory: 256Mi}, limits: {cpu: "1"}}
    execution:
      tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
      service_account: runner
    notify:
      - {events: [success], webhook_secret: ok_hook, format: slack}
  lit:
    command: ["echo", "x"]
    map_over: [a, 2, {k: v}]
  cf:
    command: x
    map_over: {conf: files}
  out:
    command: x
    depends_on: [up]
    map_over: {output: up}
    max_map_items: 10
"""


def test_every_kind_of_field_reads_back_as_a_whole_parse_does() -> None:
    spec = parse_dag(_RICH, Path("rich.yaml"))
    text = CatalogueEntry.of(spec, fileloc="rich.yaml", source=None).spec_json
    whole = DagSpec.model_validate_json(text)
    back = parse_spec(text)
    assert back == whole == spec
    assert back.model_dump_json() == text
    assert back.tasks["cf"].map_over == whole.tasks["cf"].map_over
    assert type(back.tasks["out"].map_over) is type(whole.tasks["out"].map_over)


def test_a_stored_spec_that_does_not_validate_says_where() -> None:
    text = _stored()[1].replace('"retries":0', '"retries":-1', 1)
    with pytest.raises(ValueError, match=r"tasks\.a\.retries"):
        parse_spec(text)


def _stored() -> tuple[DagSpec, str]:
    spec = parse_dag(_DAG, Path("shared.yaml"))
    return spec, CatalogueEntry.of(spec, fileloc="shared.yaml", source=None).spec_json


def test_read_back_spec_equals_and_dumps_as_stored() -> None:
    spec, text = _stored()
    back = parse_spec(text)
    assert back == spec
    assert back.model_dump_json() == text
    assert back.tasks["c"].resources.limits.cpu == "2"
    assert back.tasks["e"].execution.node_selector == {"disk": "ssd"}


def test_equal_parts_are_one_object_and_different_ones_are_not() -> None:
    tasks = parse_spec(_stored()[1]).tasks
    assert tasks["a"].resources is tasks["b"].resources
    assert tasks["c"].resources is tasks["d"].resources
    assert tasks["a"].resources is not tasks["c"].resources
    assert tasks["a"].resources.requests is tasks["c"].resources.requests  # both empty
    assert tasks["a"].execution is tasks["b"].execution
    assert tasks["e"].execution is not tasks["a"].execution  # a dict inside: its own
    assert tasks["a"].model_fields_set is tasks["b"].model_fields_set


def test_a_copy_with_changes_leaves_the_shared_names_alone() -> None:
    tasks = parse_spec(_stored()[1]).tasks
    names = set(tasks["b"].model_fields_set)
    changed = tasks["a"].model_copy(update={"depends_on": ("x",)})
    assert changed.depends_on == ("x",)
    assert tasks["b"].model_fields_set == names
    assert tasks["b"].depends_on == ("a",)
