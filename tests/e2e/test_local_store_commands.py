"""One rule for the commands that read runs: with no server named (no --server, no
LEOFLOW_SERVER), `runs`, `tasks`, `logs` and `dags list` read the local store, which
`leoflow run` wrote; `dags list` keeps a DAG only `leoflow run FILE` registered apart."""

from __future__ import annotations

import json
import re

from tests.e2e.conftest import Leoflow


def test_after_leoflow_run_the_reading_commands_need_no_server(leoflow: Leoflow) -> None:
    ran = leoflow("run", "examples/dags/etl.yaml")
    assert ran.returncode == 0, ran.stderr
    found = re.search(r"run (local__\S+) of nightly_sales", ran.stdout)
    assert found is not None
    run_id = found.group(1)

    runs = leoflow("runs", "--json")
    assert runs.returncode == 0, runs.stderr
    assert [r["run_id"] for r in json.loads(runs.stdout)["runs"]] == [run_id]
    tasks = leoflow("tasks", "nightly_sales", run_id)
    assert tasks.returncode == 0, tasks.stderr
    assert re.search(r"^extract_products\s+success\s+2/3", tasks.stdout, re.M), tasks.stdout
    why = leoflow("tasks", "why", "nightly_sales", run_id, "load_orders")
    assert why.returncode == 0, why.stderr
    assert why.stdout.startswith("load_orders (success)")
    logs = leoflow("logs", "nightly_sales", run_id, "load_orders")
    assert "loading orders into analytics" in logs.stdout, logs.stderr

    listed = leoflow("dags", "list")
    assert listed.returncode == 0, listed.stderr
    assert "nightly_sales" not in listed.stdout
    assert "1 DAG registered only by leoflow run FILE not shown; --all shows them" in (
        listed.stderr
    )
    everything = leoflow("dags", "list", "--all")
    header, row = everything.stdout.splitlines()[:2]
    assert header.split() == ["DAG", "PAUSED", "SCHEDULE", "TASKS", "ACTIVE", "FROM"]
    assert row.split()[0] == "nightly_sales"
    assert row.endswith("leoflow run examples/dags/etl.yaml")
