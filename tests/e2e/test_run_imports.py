"""`leoflow run` imports only what runs: what a whole `leoflow run` process imported,
read from `python -X importtime` (every module, in the process itself, as it ran)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import REPO

_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)

# None of these is used by a one-task `leoflow run` on a database at head.
NOT_ON_THE_RUN_PATH = (
    "alembic",  # the schema is at head: one query says so
    "prometheus_client",  # nothing scrapes a `leoflow run` process
    "fastapi",
    "uvicorn",
    "httpx",
    "jinja2",
    "kubernetes_asyncio",
    "asyncpg",  # SQLite's run: the PostgreSQL driver loads with a PostgreSQL URL only
)


# Leoflow's own packages a `leoflow run` has no use for: the HTTP API, Kubernetes.
OWN_NOT_ON_THE_RUN_PATH = ("leoflow.api", "leoflow.kube")


def _run_imports(dag: Path, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "leoflow", "run", str(dag)],
        env={**env, "LEOFLOW_EXECUTOR": "agent"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run " in done.stdout and "success" in done.stdout, done.stdout
    names = _IMPORTED.findall(done.stderr)
    own = sorted(
        n for n in names for p in OWN_NOT_ON_THE_RUN_PATH if n == p or n.startswith(p + ".")
    )
    assert own == [], f"a `leoflow run` imported {own}"
    return {name.split(".")[0] for name in names}


def test_a_run_at_head_imports_neither_alembic_nor_metrics(
    tmp_path: Path, env: dict[str, str]
) -> None:
    dag = tmp_path / "one.yaml"
    dag.write_text('dag_id: one\ntasks:\n  only:\n    command: ["true"]\n')
    fresh = _run_imports(dag, env)
    assert "alembic" in fresh  # a new database is migrated: Alembic is seen when used
    assert "sqlalchemy" in fresh
    for _ in range(2):  # twice: the check is one query, not a race a second run can lose
        at_head = _run_imports(dag, env)
        assert {"sqlalchemy", "grpc", "pydantic"} <= at_head
        loaded = sorted(set(NOT_ON_THE_RUN_PATH) & at_head)
        assert loaded == [], f"a `leoflow run` at head imported {loaded}"
