"""The dbt adapter on disk: which manifest is used, when dbt parse is needed, the errors,
and the task wrapper's exit reasons. No dbt runs here (see tests/e2e/test_dbt.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dagfile.problems import DagFileError
from leoflow.dbt.project import expander, fingerprint, secret_env_name
from leoflow.dbt.task import reason_from_output, reason_from_results, run

pytestmark = pytest.mark.slow  # runs dbt

MANIFEST = {
    "metadata": {"project_name": "mini"},
    "nodes": {
        "model.mini.a": {
            "resource_type": "model",
            "name": "a",
            "package_name": "mini",
            "fqn": ["mini", "a"],
            "depends_on": {"nodes": []},
            "config": {"materialized": "table"},
            "raw_code": "select 1",
            "columns": {},
        }
    },
    "sources": {},
}


def _project(tmp: Path, manifest_age: float = 60.0) -> Path:
    project = tmp / "mini"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: mini\nprofile: mini\n")
    (project / "models" / "a.sql").write_text("select 1\n")
    (project / "target").mkdir()
    shipped = project / "target" / "manifest.json"
    shipped.write_text(json.dumps(MANIFEST))
    stamp = time.time() + manifest_age
    os.utime(shipped, (stamp, stamp))
    return project


def _dag(tmp: Path, body: str = "") -> Path:
    path = tmp / "dag.yaml"
    path.write_text(
        "dag_id: mini\ndbt:\n  project_dir: mini\n  executable: /nonexistent/dbt\n" + body
    )
    return path


def _load(tmp: Path, path: Path) -> object:
    return load_dag_file(path, LoadOptions(dbt=expander(tmp / "cache")))


def test_a_fresh_shipped_manifest_is_used_without_dbt_and_then_cached_slim(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    loaded = _load(tmp_path, _dag(tmp_path))
    assert set(loaded.spec.tasks) == {"dbt.a"}  # type: ignore[attr-defined]
    cached = list((tmp_path / "cache").glob("*/manifest-*.json"))
    assert len(cached) == 1
    slim = json.loads(cached[0].read_text())
    assert "raw_code" not in slim["nodes"]["model.mini.a"]
    assert "LEOFLOW_DBT_PARTIAL_PARSE" not in loaded.spec.tasks["dbt.a"].env  # type: ignore[attr-defined]
    (project / "target" / "partial_parse.msgpack").write_bytes(b"parsed")
    again = _load(tmp_path, _dag(tmp_path))
    env = again.spec.tasks["dbt.a"].env  # type: ignore[attr-defined]
    assert env["LEOFLOW_DBT_PARTIAL_PARSE"] == str(project / "target" / "partial_parse.msgpack")
    (project / "target" / "manifest.json").unlink()  # the cache alone is enough now
    assert set(_load(tmp_path, _dag(tmp_path)).spec.tasks) == {"dbt.a"}  # type: ignore[attr-defined]


def test_a_stale_manifest_needs_dbt_parse_and_says_so_when_dbt_is_missing(tmp_path: Path) -> None:
    _project(tmp_path, manifest_age=-60.0)  # older than the model file
    with pytest.raises(DagFileError) as caught:
        _load(tmp_path, _dag(tmp_path))
    text = str(caught.value)
    assert "dag.yaml:4: dbt.executable: the project has no fresh target/manifest.json" in text
    assert "'/nonexistent/dbt' was not found" in text


def test_a_missing_project_and_missing_profiles_are_errors_at_their_field(tmp_path: Path) -> None:
    with pytest.raises(DagFileError) as caught:
        _load(tmp_path, _dag(tmp_path))
    assert f"dag.yaml:3: dbt.project_dir: dbt project {tmp_path / 'mini'} does not exist" in str(
        caught.value
    )
    _project(tmp_path)
    with pytest.raises(DagFileError) as caught:
        _load(tmp_path, _dag(tmp_path, "  profiles_dir: nowhere\n"))
    assert "dbt.profiles_dir: " in str(caught.value)
    assert "has no profiles.yml" in str(caught.value)


def test_the_fingerprint_follows_content_not_the_target_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    first = fingerprint(project).digest
    (project / "target" / "run_results.json").write_text("{}")
    assert fingerprint(project).digest == first
    (project / "models" / "a.sql").write_text("select 2\n")
    assert fingerprint(project).digest != first


def test_secret_env_names_follow_the_agent_s_rule() -> None:
    from leoflow.agent.task import secret_env_name as agent_rule

    for name in ("warehouse_password", "db.pass-word", "x9"):
        assert secret_env_name(name) == agent_rule(name)


def test_reasons_name_the_node_and_dbt_s_own_line() -> None:
    results = {
        "results": [
            {"unique_id": "model.shop.ok", "status": "success", "message": "OK"},
            {
                "unique_id": "model.shop.orders",
                "status": "error",
                "message": 'Runtime Error in model orders\n  Binder Error: column "x" not found',
            },
        ]
    }
    assert reason_from_results(results) == (
        'dbt model orders failed: Runtime Error in model orders Binder Error: column "x" not found'
    )
    failing_test = {
        "results": [
            {
                "unique_id": "test.shop.unique_orders_id.abc",
                "status": "fail",
                "message": "Got 2 results, configured to fail if != 0",
            }
        ]
    }
    assert reason_from_results(failing_test) == (
        "dbt test unique_orders_id failed: Got 2 results, configured to fail if != 0"
    )
    assert reason_from_results({"results": [{"status": "success"}]}) is None
    output = [
        "21:00:01  Running with dbt=1.11.16\n",
        "21:00:02  Encountered an error:\n",
        "21:00:02  Runtime Error\n",
        "21:00:02    Env var required but not provided: 'LEOFLOW_SECRET_PW'\n",
    ]
    assert reason_from_output(output) == (
        "Runtime Error Env var required but not provided: 'LEOFLOW_SECRET_PW'"
    )


def test_the_wrapper_passes_the_exit_code_and_writes_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in for dbt (a python script) that fails the way dbt does."""
    fake = tmp_path / "fake_dbt.py"
    fake.write_text(
        "import json, os, sys\n"
        "target = os.environ['DBT_TARGET_PATH']\n"
        "json.dump({'results': [{'unique_id': 'model.p.m', 'status': 'error',\n"
        "           'message': 'Database Error in model m'}]},\n"
        "          open(os.path.join(target, 'run_results.json'), 'w'))\n"
        "print('target', target)\n"
        "sys.exit(1)\n"
    )
    monkeypatch.setenv("DBT_TARGET_PATH", str(tmp_path / "t" / "target"))
    monkeypatch.setenv("DBT_LOG_PATH", str(tmp_path / "t" / "logs"))
    monkeypatch.setenv("LEOFLOW_EXIT_REASON_FILE", str(tmp_path / "reason"))
    (tmp_path / "seed.msgpack").write_bytes(b"load-time parse")
    monkeypatch.setenv("LEOFLOW_DBT_PARTIAL_PARSE", str(tmp_path / "seed.msgpack"))
    code = run(["--task", "dbt.m", "--", sys.executable, str(fake), "run"])
    assert code == 1
    assert (tmp_path / "reason").read_text() == "dbt model m failed: Database Error in model m"
    assert (tmp_path / "t" / "logs").is_dir()
    # the first run starts from the load-time parse
    assert (tmp_path / "t" / "target" / "partial_parse.msgpack").read_bytes() == b"load-time parse"
    assert run(["--task", "dbt.m"]) == 2  # no dbt command: usage


def test_a_dag_folder_holding_its_dbt_project_loads_the_dag_and_not_dbt_s_yaml(
    tmp_path: Path,
) -> None:
    from leoflow.dagfile.loader import load_dag_folder

    folder = tmp_path / "dags"
    folder.mkdir()
    _project(folder)
    (folder / "mini" / "models" / "schema.yml").write_text("version: 2\nmodels: []\n")
    _dag(folder)
    result = load_dag_folder(folder, LoadOptions(dbt=expander(tmp_path / "cache")))
    assert result.errors == []
    assert set(result.dags) == {"mini"}
