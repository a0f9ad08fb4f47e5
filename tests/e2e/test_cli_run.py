"""`leoflow run`, `leoflow dags validate` and `leoflow logs` as a user types them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.conftest import Leoflow


def _row(table: str, task: str) -> list[str]:
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == task:
            return cells
    raise AssertionError(f"no row for {task} in:\n{table}")


def test_the_example_etl_dag_succeeds_with_one_retry(leoflow: Leoflow) -> None:
    done = leoflow("run", "examples/dags/etl.yaml")  # its warehouse pool: the file's pools:
    assert done.returncode == 0, done.stderr + done.stdout
    table = done.stdout.split("\n\n")[-2]
    for task in ("extract_orders", "load_orders", "build_sales_mart", "check_sales_mart"):
        assert _row(table, task)[1:3] == ["success", "1"]
    assert _row(table, "extract_products")[1:3] == ["success", "2"]
    assert "extract_products up_for_retry: exited with code 75" in done.stdout
    assert re.search(r"run local__\S+ of nightly_sales: success", done.stdout)


def test_the_failing_example_exits_1_and_says_why_per_task(leoflow: Leoflow) -> None:
    done = leoflow("run", "examples/dags/broken_upstream.yaml", "--executor", "subprocess")
    assert done.returncode == 1
    table = done.stdout.split("\n\n")[-2]
    assert _row(table, "extract") == [
        "extract",
        "failed",
        "2",
        _row(table, "extract")[3],
        "exited with code 2",
    ]
    assert _row(table, "report")[1:] == ["upstream_failed", "0", "-", "upstream failed: extract"]
    assert _row(table, "unrelated")[1:3] == ["success", "1"]


def test_logs_prints_each_try(leoflow: Leoflow) -> None:
    done = leoflow("run", "examples/dags/broken_upstream.yaml")
    run_id = re.search(r"run (local__\S+) of failing_report", done.stdout)
    assert run_id is not None, done.stdout
    first = leoflow("logs", "failing_report", run_id.group(1), "extract", "--try", "1")
    assert first.returncode == 0
    assert "connecting to db.internal:5432" in first.stdout
    assert "connection refused" in first.stdout
    missing = leoflow("logs", "failing_report", run_id.group(1), "nope")
    assert missing.returncode == 1
    assert "has no task 'nope'" in missing.stderr


def test_run_and_validate_reject_an_unknown_pool_with_its_line(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    dag = tmp_path / "pools.yaml"
    dag.write_text(
        "dag_id: pools\n"
        "pools:\n"
        "  mine: {slots: 1}\n"
        "tasks:\n"
        "  a: {command: 'true', pool: mine}\n"
        "  b:\n"
        "    command: 'true'\n"
        "    pool: warehouse\n"
    )
    expected = f"{dag}:8: tasks.b.pool: unknown pool 'warehouse' (pools: default_pool, mine)"
    ran = leoflow("run", str(dag))
    assert ran.returncode == 1
    assert expected in ran.stderr
    checked = leoflow("dags", "validate", str(dag))
    assert checked.returncode == 1
    assert expected in checked.stderr
    settings = tmp_path / "settings.yaml"
    settings.write_text("pools: {warehouse: 2}\n")
    assert leoflow("--config", str(settings), "dags", "validate", str(dag)).returncode == 0
    assert leoflow("dags", "validate", str(dag), "--pools", "warehouse").returncode == 0
    assert leoflow("--config", str(settings), "run", str(dag)).returncode == 0


def test_validate_lists_every_problem_with_file_line_and_field(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "good.yaml").write_text("dag_id: good\ntasks:\n  a: {command: 'true'}\n")
    (folder / "bad.yaml").write_text(
        "dag_id: bad\n"
        "max_active_tasks: 0\n"
        "tasks:\n"
        "  a:\n"
        "    command: 'true'\n"
        "    depends_on: [b]\n"
        "  b:\n"
        "    command: 'true'\n"
        "    depends_on: [a]\n"
        "    retries: lots\n"
    )
    (folder / "dup.yaml").write_text("dag_id: good\ntasks:\n  a: {command: 'true'}\n")
    done = leoflow("dags", "validate", str(folder))
    assert done.returncode == 1
    bad = str(folder / "bad.yaml")
    assert (
        f"{bad}:2: max_active_tasks: input should be greater than or equal to 1, got 0"
        in done.stderr
    )
    assert f"{bad}:10: tasks.b.retries: input should be a valid integer" in done.stderr
    assert f"{folder / 'good.yaml'}" in done.stderr  # the duplicate names the first file
    assert "duplicate dag_id 'good'" in done.stderr
    assert "ok  good  (1 task)" in done.stdout

    (folder / "bad.yaml").unlink()
    (folder / "dup.yaml").unlink()
    (folder / "cycle.yaml").write_text(
        "dag_id: cyc\ntasks:\n"
        "  a: {command: x, depends_on: [b]}\n"
        "  b: {command: y, depends_on: [a]}\n"
    )
    cycle = leoflow("dags", "validate", str(folder))
    assert cycle.returncode == 1
    assert "dependency cycle: a -> b -> a" in cycle.stderr


def test_db_prune_dry_run_then_prune(leoflow: Leoflow, tmp_path: Path) -> None:
    dag = tmp_path / "one.yaml"
    dag.write_text('dag_id: one\ntasks:\n  only:\n    command: ["true"]\n')
    assert leoflow("run", str(dag), "--executor", "subprocess").returncode == 0
    dry = leoflow("db", "prune", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would delete 1 run, 1 task instance, ")
    done = leoflow("db", "prune", "--older-than", "0s")
    assert done.stdout.startswith("deleted 1 run, 1 task instance, ")
    again = leoflow("db", "prune", "--older-than", "0s")
    assert again.stdout.startswith("deleted 0 runs, 0 task instances")
    bad = leoflow("db", "prune", "--older-than", "soon")
    assert bad.returncode == 2
    assert "--older-than" in bad.stderr


def test_the_early_agent_runs_the_task_and_leaves_no_socket_behind(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    # `leoflow run` starts its agent on a Unix socket in a private temp directory
    # before the store opens; that directory goes when the run ends, failed or not.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)
    dag = tmp_path / "one.yaml"
    dag.write_text('dag_id: one\ntasks:\n  only:\n    command: ["sh", "-c", "echo hi"]\n')
    done = leoflow("run", str(dag), "--executor", "agent")
    assert done.returncode == 0, done.stderr + done.stdout
    assert _row(done.stdout.split("\n\n")[-2], "only")[1:3] == ["success", "1"]
    missing = leoflow("run", str(tmp_path / "absent.yaml"), "--executor", "agent")
    assert missing.returncode == 1
    assert [p.name for p in scratch.iterdir() if p.name.startswith("leoflow-run-")] == []


def test_a_temp_dir_too_long_for_a_unix_socket_runs_on_the_usual_endpoint(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    # The early agent's socket path must fit sun_path (108 bytes); under a longer
    # TMPDIR leoflow run takes the usual path (endpoint first, on loopback TCP).
    scratch = tmp_path / ("t" * 100)
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)
    dag = tmp_path / "one.yaml"
    dag.write_text('dag_id: one\ntasks:\n  only:\n    command: ["sh", "-c", "echo hi"]\n')
    done = leoflow("run", str(dag), "--executor", "agent")
    assert done.returncode == 0, done.stderr + done.stdout
    assert _row(done.stdout.split("\n\n")[-2], "only")[1:3] == ["success", "1"]
    assert list(scratch.iterdir()) == []


def test_run_rejects_a_missing_webhook_secret_before_starting(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    dag = tmp_path / "alerting.yaml"
    dag.write_text(
        "dag_id: alerting\n"
        "tasks:\n"
        "  t:\n"
        "    command: echo never\n"
        "    notify:\n"
        "      - {events: [failure], webhook_secret: slack_url}\n"
    )
    done = leoflow("run", str(dag))
    assert done.returncode == 1
    assert (
        f"{dag}:6: tasks.t.notify.0.webhook_secret: webhook secret 'slack_url' does not exist "
        "in the secrets directory"
    ) in done.stderr
    assert "never" not in done.stdout


def test_validate_warns_when_reuse_pods_cannot_share_a_pod(
    leoflow: Leoflow, tmp_path: Path
) -> None:
    dag = tmp_path / "warm.yaml"
    dag.write_text(
        "dag_id: warm\nkubernetes:\n  reuse_pods: {max_pods: 2}\ntasks:\n"
        "  a: {command: 'true', image: 'one:1'}\n  b: {command: 'true', image: 'two:1'}\n"
    )
    done = leoflow("dags", "validate", str(dag))
    assert done.returncode == 0, done.stderr
    assert "warm: kubernetes.reuse_pods: no two tasks share a pod shape" in done.stderr
    assert "the 'agent' executor ignores it" in done.stderr
    dag.write_text(dag.read_text().replace("two:1", "one:1"))
    shared = leoflow("--config", str(_kube_settings(tmp_path)), "dags", "validate", str(dag))
    assert shared.returncode == 0 and "reuse_pods" not in shared.stderr, shared.stderr


def _kube_settings(tmp_path: Path) -> Path:
    settings = tmp_path / "kube.yaml"
    settings.write_text("executor: kubernetes\n")
    return settings
