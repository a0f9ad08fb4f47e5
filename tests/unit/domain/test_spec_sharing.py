"""A stored spec read back shares its tasks' equal parts and is still the same spec."""

from __future__ import annotations

from pathlib import Path

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
