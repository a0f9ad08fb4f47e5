"""Task ids from a manifest the real ``dbt parse`` (``.venv-dbt``) writes: versioned
models, and names dbt accepts that one task id cannot tell apart."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dagfile.problems import DagFileError
from leoflow.dbt.project import expander
from tests.support.dbt import dbt_bin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # runs dbt parse

SCHEMA = """
version: 2
models:
  - name: dim
    latest_version: 2
    versions: [{v: 1}, {v: 2}]
"""


def _project(tmp: Path) -> Path:
    project = tmp / "p"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: p\nversion: '1.0.0'\nconfig-version: 2\nprofile: p\n"
    )
    (project / "models" / "schema.yml").write_text(SCHEMA)
    (project / "models" / "dim_v1.sql").write_text("select 1 as id\n")
    (project / "models" / "dim_v2.sql").write_text("select 2 as id\n")
    (project / "models" / "report.sql").write_text("select * from {{ ref('dim', v=2) }}\n")
    (tmp / "profiles").mkdir()
    (tmp / "profiles" / "profiles.yml").write_text(
        f"p:\n  target: dev\n  outputs:\n    dev: {{type: duckdb, path: {tmp / 'p.duckdb'}}}\n"
    )
    (tmp / "dag.yaml").write_text(
        f"dag_id: p\ndbt:\n  project_dir: p\n  profiles_dir: profiles\n"
        f"  executable: {dbt_bin()}\n  tests: none\n"
    )
    return project


def test_versions_are_tasks_of_their_own_that_dbt_selects_alone(tmp_path: Path) -> None:
    _project(tmp_path)
    loaded = load_dag_file(tmp_path / "dag.yaml", LoadOptions(dbt=expander(tmp_path / "cache")))
    tasks = loaded.spec.tasks
    assert set(tasks) == {"dbt.dim.v1", "dbt.dim.v2", "dbt.report"}
    assert tasks["dbt.report"].depends_on == ("dbt.dim.v2",)
    argv = list(tasks["dbt.dim.v2"].command)
    dbt_argv = argv[argv.index("--") + 1 :]
    listed = subprocess.run(
        [dbt_argv[0], "ls", "--quiet", "--output", "name", *dbt_argv[2:]],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**tasks["dbt.dim.v2"].env, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert listed.stdout.split() == ["dim.v2"]


def test_names_dbt_accepts_but_one_task_id_cannot_tell_apart_are_a_load_error(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    for name in ("Orders", "orders", "order$items", "order_items", "order+items"):
        (project / "models" / f"{name}.sql").write_text("select 1 as id\n")
    with pytest.raises(DagFileError) as caught:
        load_dag_file(tmp_path / "dag.yaml", LoadOptions(dbt=expander(tmp_path / "cache")))
    text = str(caught.value)
    assert "dbt.project_dir" in text
    for uid in ("model.p.Orders", "model.p.orders", "model.p.order$items", "model.p.order+items"):
        assert uid in text
    assert "'dbt.p.order_items'" in text and "'dbt.p.Orders' / 'dbt.p.orders'" in text
