"""examples/dbt as `make dbt-example` runs it: a DuckDB dbt project whose dbt tasks share
a pool of one slot, so no two dbt commands hold DuckDB's file at once and every task
succeeds on its first try; and `dags validate --json` on it says on stderr that it is
parsing the project while stdout stays one JSON document."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.support.dbt import dbt_bin, query

from .conftest import LEOFLOW, REPO

pytestmark = pytest.mark.timeout(1500)


def _recipe(target: str) -> str:
    makefile = (REPO / "Makefile").read_text()
    return makefile.split(f"\n{target}:", 1)[1].splitlines()[1].strip()


def test_make_dbt_example_builds_the_project_with_every_task_on_its_first_try(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    recipe = _recipe("dbt-example")
    # The recipe: dbt's venv first on PATH, then Leoflow as `pip install .` gives it.
    assert recipe.startswith('PATH="$(CURDIR)/$(DBT_VENV)/bin:$$PATH" '), recipe
    args = shlex.split(recipe)[2:]
    assert args == ["run", "examples/dbt/shop_dbt.yaml"], recipe
    env = {
        **env,
        "PATH": f"{dbt_bin().parent}{os.pathsep}{env['PATH']}",
        "HOME": str(tmp_path),  # the example's DuckDB file goes to the user's home
    }

    def leoflow(*argv: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [LEOFLOW, *argv], env=env, cwd=REPO, capture_output=True, text=True, timeout=700
        )
        return done.returncode, done.stdout, done.stderr

    code, out, err = leoflow("dags", "validate", "examples/dbt", "--json")
    assert code == 0, out + err
    document = json.loads(out)  # the parse's progress did not reach stdout
    assert document["valid"] and document["dags"][0]["dag_id"] == "shop_dbt", document
    assert re.search(r"dbt parse of \S+/examples/dbt/shop: no fresh manifest", err), err
    assert re.search(r"dbt parse of \S+/examples/dbt/shop: done in [\d.]+s \(exit 0\)", err), err

    code, out, err = leoflow(*args)
    assert code == 0, out + err
    assert "dbt parse" not in err, err  # the manifest validate built is reused
    with sqlite3.connect(home / "leoflow.db", timeout=10) as db:
        rows = db.execute("select task_id, state, try_number from task_instances").fetchall()
    assert len(rows) == 10, rows
    assert {(task, state, tries) for task, state, tries in rows} == {
        (task, "success", 1) for task, _, _ in rows
    }
    revenue = query(
        tmp_path / "leoflow-example-shop.duckdb",
        "select name, revenue from customer_revenue order by customer_id",
    )
    assert revenue == [("Ada", 37.5), ("Grace", 40.0), ("Edsger", 7.25)]
