"""`leoflow run` and `leoflow logs` as typed, with the control plane's secrets exported."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.e2e.conftest import Leoflow

SIGNING_KEY = "e2e-signing-key-0123456789abcdef"
CLIENT_TOKEN = "e2e-client-token-abcdef"
SECRET = "correct horse battery staple"


def test_a_task_sees_no_control_plane_secret_and_its_own_secret_is_masked(
    leoflow: Leoflow, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    env.update(LEOFLOW_TOKEN_SIGNING_KEY=SIGNING_KEY, LEOFLOW_TOKEN=CLIENT_TOKEN)
    (home / "secrets").mkdir()
    (home / "secrets" / "api_key").write_text(SECRET)
    script = (
        "import json, os; "
        "print('secret', os.environ['LEOFLOW_SECRET_API_KEY']); "
        "print(json.dumps(sorted(os.environ)))"
    )
    dag = tmp_path / "isolated.yaml"
    dag.write_text(
        "dag_id: isolated\ntasks:\n  t:\n    secrets: [api_key]\n"
        f"    command: [{json.dumps(sys.executable)}, -c, {json.dumps(script)}]\n"
    )
    done = leoflow("run", str(dag))
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = re.search(r"run (local__\S+) of isolated", done.stdout)
    assert run_id is not None, done.stdout
    logs = leoflow("logs", "isolated", run_id.group(1), "t")
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert "secret ***" in lines
    assert SECRET not in logs.stdout and SIGNING_KEY not in logs.stdout
    names = json.loads(next(line for line in lines if line.startswith("[")))
    assert "LEOFLOW_TOKEN_SIGNING_KEY" not in names and "LEOFLOW_TOKEN" not in names
    assert "LEOFLOW_HOME" not in names
    assert [n for n in names if n.startswith("LEOFLOW_")] == [
        "LEOFLOW_DAG_ID",
        "LEOFLOW_EXIT_REASON_FILE",  # where a command may write why it failed
        "LEOFLOW_OUTPUT",  # where it may write its output for its downstream tasks
        "LEOFLOW_RUN_ID",
        "LEOFLOW_SECRET_API_KEY",
        "LEOFLOW_TASK_ID",
        "LEOFLOW_TRY_NUMBER",
    ]
