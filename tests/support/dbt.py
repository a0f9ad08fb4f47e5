"""The dbt the tests run: ``.venv-dbt`` (``make dbt-venv``), never Leoflow's own venv."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "dbt"
DBT_VENV = REPO / ".venv-dbt"


def dbt_bin(name: str = "dbt") -> Path:
    path = DBT_VENV / "bin" / name
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run `make dbt-venv` (make test does)")
    return path


def copy_project(tmp: Path, name: str) -> Path:
    """A private copy of a fixture project and the shared profiles, so runs never meet."""
    shutil.copytree(FIXTURES / name, tmp / name)
    shutil.copytree(FIXTURES / "profiles", tmp / "profiles", dirs_exist_ok=True)
    shutil.copy(FIXTURES / "extract_orders.py", tmp / "extract_orders.py")
    return tmp / name


def query(database: Path, sql: str) -> list[tuple[object, ...]]:
    """Rows from the DuckDB file, read by the dbt venv's python (duckdb is not in ours)."""
    script = (
        "import duckdb, json, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(json.dumps([list(r) for r in con.execute(sys.argv[2]).fetchall()], default=str))\n"
    )
    out = subprocess.run(
        [str(dbt_bin("python")), "-c", script, str(database), sql],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    import json

    return [tuple(row) for row in json.loads(out.stdout)]


SHOP_NODES = (
    "dbt.raw_customers",
    "dbt.raw_payments",
    "dbt.stg_customers",
    "dbt.stg_orders",
    "dbt.stg_payments",
    "dbt.customer_revenue",
    "dbt.customers_snapshot",
    "dbt.tests",
)


def assert_shop_built(database: Path) -> None:
    """The shop project's marts and snapshot, as a full build leaves them."""
    assert query(database, "select customer_id, revenue from customer_revenue order by 1") == [
        (1, 37.5),
        (2, 40.0),
        (3, 7.25),
    ]
    assert query(database, "select count(*) from snapshots.customers_snapshot") == [(3,)]


def broken_dag(tmp: Path, dag_id: str, database: Path, extra: str = "") -> Path:
    """A DAG of the broken fixture project alone; ``extra`` adds lines to its dbt section."""
    copy_project(tmp, "broken")
    dag = tmp / "broken.yaml"
    dag.write_text(
        f"dag_id: {dag_id}\nmax_active_tasks: 1\ndbt:\n  project_dir: broken\n"
        f"  profiles_dir: profiles\n  executable: {dbt_bin()}\n{extra}"
        f'  defaults:\n    env: {{SHOP_DUCKDB_PATH: "{database}"}}\n'
    )
    return dag
