"""Outputs between tasks as a user runs them: ``leoflow run`` and ``leoflow logs``."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import LEOFLOW, Leoflow
from tests.e2e.test_dbt import _query, _tasks, _wait

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


def _rows(stdout: str) -> dict[str, list[str]]:
    table = stdout.split("\n\n")[-2]
    return {
        cells[0]: cells
        for cells in (re.split(r"\s{2,}", line.strip()) for line in table.splitlines()[1:])
    }


def test_a_task_mapped_over_an_upstreams_50_items_retries_one_item_alone(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    produce = (
        "import json, os; "
        "json.dump([f'file-{i}' for i in range(50)], open(os.environ['LEOFLOW_OUTPUT'], 'w'))"
    )
    each = (
        'echo "$LEOFLOW_MAP_INDEX $LEOFLOW_MAP_ITEM try $LEOFLOW_TRY_NUMBER"; '
        '[ "$LEOFLOW_MAP_INDEX" = 17 ] && [ "$LEOFLOW_TRY_NUMBER" = 1 ] && exit 3; '
        'echo "$LEOFLOW_MAP_ITEM" > "$LEOFLOW_OUTPUT"'
    )
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""dag_id: fanout
tasks:
  list_files:
    command: [{PY}, "-c", {json.dumps(produce)}]
  each:
    depends_on: [list_files]
    map_over: {{output: list_files}}
    retries: 1
    command: {json.dumps(each)}
  summary:
    depends_on: [each]
    command: 'echo "$LEOFLOW_INPUT_EACH"'
"""
    )
    done = leoflow("run", str(dag), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(done.stdout)
    items = {f"each[{i}]" for i in range(50)}
    assert items <= set(rows) and "each" not in rows
    # The failing item ran twice; no other item ran again.
    assert rows["each[17]"][1:3] == ["success", "2"]
    assert all(rows[t][1:3] == ["success", "1"] for t in items - {"each[17]"})
    run_id = _run_id(done.stdout, "fanout")
    first = leoflow("logs", "fanout", run_id, "each[17]", "--try", "1")
    assert '17 "file-17" try 1' in first.stdout, first.stdout + first.stderr
    # The downstream ran once, after every item: it got all 50 outputs in order.
    assert rows["summary"][1:3] == ["success", "1"]
    summary = leoflow("logs", "fanout", run_id, "summary")
    listed = next(line for line in summary.stdout.splitlines() if line.startswith("["))
    assert json.loads(listed) == [f"file-{i}" for i in range(50)]


def test_lite_maps_over_conf_clears_one_item_alone_and_shows_outputs(
    env: dict[str, str], leoflow: Leoflow, home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "regions.yaml").write_text(
        """dag_id: regions
tasks:
  each:
    map_over: {conf: regions}
    command: >-
      echo "{\\"region\\": $LEOFLOW_MAP_ITEM, \\"try\\": $LEOFLOW_TRY_NUMBER}"
      > $LEOFLOW_OUTPUT
"""
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    lite_env = {**env, "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2"}
    lite_env["LEOFLOW_API_LISTEN"] = f"127.0.0.1:{port}"
    with open(tmp_path / "lite.out", "w") as out:
        proc = subprocess.Popen(
            [LEOFLOW, "lite", "--dags", str(folder)], env=lite_env, stdout=out, stderr=out
        )
    try:
        conf = json.dumps({"regions": ["eu", "us", "apac"]})
        trigger = ("trigger", "regions", "--run-id", "r1", "--conf", conf, "--server", server)
        _wait(lambda: leoflow(*trigger).returncode == 0, "the DAG to load and take a run", 120)
        items = {f"each[{i}]" for i in range(3)}
        _wait(lambda: {t for t, (s, _, _) in _tasks(home).items() if s == "success"} == items,
              "the items to succeed", 120)  # fmt: skip
        _wait(lambda: _query(home, "select state from dag_runs") == [("success",)], "the run end")
        cleared = leoflow("clear", "regions", "r1", "each[1]", "--server", server)
        assert cleared.returncode == 0, cleared.stdout + cleared.stderr
        _wait(lambda: _tasks(home)["each[1]"][:2] == ("success", 2), "each[1] to run again", 120)
        tasks = _tasks(home)
        assert tasks["each[0]"][:2] == tasks["each[2]"][:2] == ("success", 1)  # not run again
        shown = leoflow("tasks", "show", "regions", "r1", "each[1]", "--server", server)
        assert shown.returncode == 0, shown.stderr
        assert "state: success" in shown.stdout and "try: 2/" in shown.stdout
        assert '"region": "us"' in shown.stdout and '"try": 2' in shown.stdout
        listed = leoflow("tasks", "regions", "r1", "--server", server, "--json")
        rows = {row["task_id"]: row for row in json.loads(listed.stdout)}
        assert rows["each[2]"]["map_index"] == 2 and rows["each[2]"]["map_item"] == "apac"
        assert rows["each[2]"]["output"] == {"region": "apac", "try": 1}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
