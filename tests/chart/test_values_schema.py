"""The chart ships values.schema.json: helm checks values against it on install, upgrade,
template and lint, so a misspelt key, a wrong type or an unknown enum is refused before
anything renders. Every value the templates read is in it, and the shipped values files
match it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.chart.chartlib import CHART, run_helm

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def _schema_paths(node: dict[str, Any], prefix: str = "") -> set[str]:
    found = set()
    for name, sub in node.get("properties", {}).items():
        found.add(prefix + name)
        found |= _schema_paths(sub, f"{prefix}{name}.")
    return found


def test_every_value_the_templates_read_is_in_the_schema() -> None:
    used = set()
    for template in (CHART / "templates").iterdir():
        used |= set(re.findall(r"\.Values((?:\.[A-Za-z0-9_]+)+)", template.read_text()))
    missing = sorted(path[1:] for path in used if path[1:] not in _schema_paths(SCHEMA))
    assert not missing, missing


@pytest.mark.parametrize("name", ["values.yaml", "values-production.yaml"])
def test_the_shipped_values_files_match_the_schema(name: str) -> None:
    jsonschema.validate(yaml.safe_load((CHART / name).read_text()), SCHEMA)


def test_every_value_in_values_yaml_is_described_by_a_type() -> None:
    def walk(values: dict[str, Any], node: dict[str, Any], path: str) -> None:
        for key, value in values.items():
            sub = node["properties"][key]
            assert "type" in sub or "enum" in sub, f"{path}{key}"
            if isinstance(value, dict) and "properties" in sub:
                walk(value, sub, f"{path}{key}.")

    walk(yaml.safe_load((CHART / "values.yaml").read_text()), SCHEMA, "")


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("scheduler.replica=3", "additional properties 'replica' not allowed"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("api.replicas=0", "replicas"),
        ("taskPodPassthrough={host_network}", "taskPodPassthrough"),
        ("logFormat=xml", "logFormat"),
    ],
)
def test_helm_lint_refuses_values_the_schema_does_not_allow(
    helm: Path, setting: str, said: str
) -> None:
    done = run_helm(helm, "lint", str(CHART), "--set", setting)
    assert done.returncode != 0, done.stdout
    assert said in done.stdout + done.stderr, done.stdout + done.stderr


def test_helm_lint_passes_on_the_defaults_and_the_production_values(helm: Path) -> None:
    for args in ((), ("-f", str(CHART / "values-production.yaml"))):
        done = run_helm(helm, "lint", str(CHART), *args)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_allows_the_passthrough_fields_the_settings_allow() -> None:
    from leoflow.settings import PASSTHROUGH_FIELDS

    items = SCHEMA["properties"]["taskPodPassthrough"]["items"]
    assert items["enum"] == list(PASSTHROUGH_FIELDS)
