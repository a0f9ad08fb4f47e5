"""Outputs between tasks as a user runs them: ``leoflow run`` and ``leoflow logs``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.e2e.conftest import Leoflow

PY = json.dumps(sys.executable)


def _run_id(stdout: str, dag_id: str) -> str:
    found = re.search(rf"run (local__\S+) of {dag_id}", stdout)
    assert found is not None, stdout
    return found.group(1)


def test_a_downstream_sees_its_upstreams_output(leoflow: Leoflow, tmp_path: Path) -> None:
    write = "import json, os; json.dump({'files': 42}, open(os.environ['LEOFLOW_OUTPUT'], 'w'))"
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""dag_id: handoff
tasks:
  count:
    command: [{PY}, "-c", {json.dumps(write)}]
  report:
    depends_on: [count]
    command: 'echo "got $LEOFLOW_INPUT_COUNT"; cat "$LEOFLOW_INPUTS_DIR/count.json"'
"""
    )
    done = leoflow("run", str(dag))
    assert done.returncode == 0, done.stdout + done.stderr
    logs = leoflow("logs", "handoff", _run_id(done.stdout, "handoff"), "report")
    assert logs.returncode == 0, logs.stderr
    assert 'got {"files": 42}' in logs.stdout.splitlines()
    assert '{"files": 42}' in logs.stdout.splitlines()


def test_a_too_big_output_fails_the_run_and_says_why(leoflow: Leoflow, tmp_path: Path) -> None:
    write = "import os; open(os.environ['LEOFLOW_OUTPUT'], 'w').write('[' + '1,' * 40000 + '1]')"
    dag = tmp_path / "dag.yaml"
    dag.write_text(f"dag_id: big\ntasks:\n  up:\n    command: [{PY}, -c, {json.dumps(write)}]\n")
    done = leoflow("run", str(dag))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the output is over the limit of 65536 bytes (64 KB)" in done.stdout
