"""The JSON Schema of leoflow.yaml: shipped as generated, every example DAG valid
against it, and what the loader refuses that JSON Schema can say refused by it too."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.dagfile.schema import dag_file_schema, schema_text, shipped_schema

REPO = Path(__file__).resolve().parents[3]
VALIDATOR = jsonschema.Draft202012Validator(json.loads(shipped_schema()))


def as_editor_reads(value: Any) -> Any:
    """YAML as an editor's schema check sees it: a timestamp is a string."""
    if isinstance(value, dict):
        return {str(k): as_editor_reads(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_editor_reads(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def schema_errors(text: str) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(as_editor_reads(yaml.safe_load(text)))]


def example_dags() -> list[tuple[str, str]]:
    """Every DAG file under examples/ and tests/fixtures/, and each DAG the README and the
    documentation site (docs/) show."""
    found = [
        (str(p.relative_to(REPO)), p.read_text())
        for folder in ("examples", "tests/fixtures")
        for p in sorted((REPO / folder).rglob("*.y*ml"))
        if re.search(r"^dag_id:", p.read_text(), re.M)
    ]
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        blocks = re.findall(r"```yaml[^\n]*\n(.*?)```", page.read_text(), re.S)
        name = page.relative_to(REPO)
        found += [(f"{name} yaml block {i}", b) for i, b in enumerate(blocks) if "dag_id:" in b]
    return found


def test_the_shipped_schema_is_what_the_models_generate() -> None:
    # After a change to leoflow/domain/dag.py:
    #   python -m leoflow.dagfile.schema > leoflow/dagfile/leoflow.schema.json
    assert shipped_schema() == schema_text(dag_file_schema())
    jsonschema.Draft202012Validator.check_schema(json.loads(shipped_schema()))


@pytest.mark.parametrize(("name", "text"), example_dags(), ids=lambda v: str(v)[:40])
def test_every_example_dag_is_valid_against_the_schema(name: str, text: str) -> None:
    assert schema_errors(text) == []


def test_the_examples_include_the_example_folder_and_the_docs() -> None:
    names = [name for name, _ in example_dags()]
    assert "examples/dags/etl.yaml" in names
    assert any(name.startswith("docs/tutorial/first-dag.md") for name in names)
    assert any(name.startswith("docs/how-to/dag-file.md") for name in names)


BASE = "dag_id: d\ntasks:\n  a: {command: 'true'}\n"
# What the loader refuses and JSON Schema can say: each refused by both.
REFUSED = {
    "unknown top-level field": BASE + "schedul: '@daily'\n",
    "unknown task field": "dag_id: d\ntasks:\n  a: {command: 'true', depends_om: []}\n",
    "bad dag_id": BASE.replace("dag_id: d", "dag_id: Not Valid"),
    "bad task id": "dag_id: d\ntasks:\n  'a b': {command: 'true'}\n",
    "retries out of range": "dag_id: d\ntasks:\n  a: {command: 'true', retries: 101}\n",
    "pool_slots zero": "dag_id: d\ntasks:\n  a: {command: 'true', pool_slots: 0}\n",
    "command not a string or list": "dag_id: d\ntasks:\n  a: {command: 5}\n",
    "bad trigger rule": "dag_id: d\ntasks:\n  a: {command: x, trigger_rule: sometimes}\n",
    "bad duration": "dag_id: d\ntasks:\n  a: {command: x, timeout: 5 minutes}\n",
    "bad quantity": "dag_id: d\ntasks:\n  a: {command: x, resources: {limits: {memory: lots}}}\n",
    "max_active_runs zero": BASE + "max_active_runs: 0\n",
    "no tasks": "dag_id: d\n",
    "pool without slots": BASE + "pools: {p: {description: x}}\n",
    "unknown defaults field": BASE + "defaults: {retires: 1}\n",
    "bad notify event": BASE + "notify: [{events: [sometimes], webhook_secret: s}]\n",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_loader_refuses_the_schema_refuses(case: str) -> None:
    text = REFUSED[case]
    with pytest.raises(DagFileError):
        parse_dag(text, Path("case.yaml"))
    assert schema_errors(text), case


def test_what_the_loader_accepts_the_schema_accepts() -> None:
    text = (
        "dag_id: d\nschedule: '@daily'\nstart_date: 2026-01-01T00:00:00Z\n"
        "pools: {p: {slots: 2}}\ndefaults: {retries: 2, retry_delay: 1m30s, command: 'true'}\n"
        "tasks:\n  a: {pool: p, env: {N: 4, F: true}, timeout: 90}\n"
        "  b: {command: [echo, hi], depends_on: [a], resources: {limits: {cpu: 0.5}}}\n"
    )
    parse_dag(text, Path("ok.yaml"))
    assert schema_errors(text) == []


def test_leoflow_dags_schema_prints_it() -> None:
    import contextlib
    import io

    from leoflow.commands.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["dags", "schema"]) == 0
    assert out.getvalue() == shipped_schema()
