"""``--json`` of the commands that work here, without a server: each prints one JSON
document on stdout, in the shape the README's "JSON output" documents."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Leoflow


def document(leoflow: Leoflow, *args: str, code: int = 0) -> Any:
    done = leoflow(*args, "--json")
    assert done.returncode == code, done.stdout + done.stderr
    return json.loads(done.stdout)  # the whole of stdout: nothing else is printed there


def test_run_logs_and_prune_answer_json(leoflow: Leoflow) -> None:
    run = document(leoflow, "run", "examples/dags/etl.yaml")
    assert (run["dag_id"], run["state"]) == ("nightly_sales", "success")
    tasks = {t["task_id"]: t for t in run["tasks"]}
    order = [t["task_id"] for t in run["tasks"]]  # the DAG's order: upstreams first
    assert set(order[:3]) == {"extract_orders", "extract_customers", "extract_products"}
    assert order[-1] == "check_sales_mart"
    assert tasks["extract_products"]["try_number"] == 2
    assert tasks["extract_products"]["max_tries"] == 3
    assert tasks["load_orders"]["duration_seconds"] > 0
    assert datetime.fromisoformat(tasks["load_orders"]["ended_at"])

    logs = document(
        leoflow, "logs", "nightly_sales", run["run_id"], "extract_products", "--try", "1"
    )
    assert logs["try_number"] == 1 and logs["task_id"] == "extract_products"
    assert "product API answered 503" in logs["log"]
    latest = document(leoflow, "logs", "nightly_sales", run["run_id"], "extract_products")
    assert latest["try_number"] == 2 and "42 rows" in latest["log"]

    pruned = document(leoflow, "db", "prune", "--older-than", "0s", "--dry-run")
    assert pruned == {
        "dry_run": True, "older_than_seconds": 0.0, "dag_id": None,
        "runs": 1, "task_instances": 8, "log_chunks": pruned["log_chunks"], "tickets": 0,
    }  # fmt: skip
    assert pruned["log_chunks"] >= 8


def test_validate_and_next_answer_json(leoflow: Leoflow, tmp_path: Path) -> None:
    valid = document(leoflow, "dags", "validate", "examples/dags")
    assert valid["valid"] is True and valid["problems"] == []
    assert {d["dag_id"]: d["tasks"] for d in valid["dags"]} == {
        "failing_report": 3, "nightly_sales": 8,
    }  # fmt: skip
    bad = tmp_path / "bad.yaml"
    bad.write_text("dag_id: bad\ntasks:\n  a: {command: x, retries: lots}\n")
    invalid = document(leoflow, "dags", "validate", str(bad), code=1)
    assert invalid == {
        "valid": False,
        "dags": [],
        "problems": [
            {"file": str(bad), "line": 3, "field": "tasks.a.retries",
             "message": "input should be a valid integer, unable to parse string as an "
                        "integer, got 'lots'"},
        ],
        "warnings": [],
    }  # fmt: skip

    fires = document(
        leoflow, "dags", "next", "examples/dags/etl.yaml", "-n", "2", "--after", "2026-03-28T12:00"
    )
    assert fires == {
        "dag_id": "nightly_sales",
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "fires": [
            {"local": "2026-03-29T03:00:00+02:00", "utc": "2026-03-29T01:00:00+00:00"},
            {"local": "2026-03-30T03:00:00+02:00", "utc": "2026-03-30T01:00:00+00:00"},
        ],
        "complete": True,
    }
