"""Memory of loading a dbt DAG whose project holds one big seed (default 300 MB), as JSON.

A generated project: one model, one seed CSV of ``--mb`` MB (real rows, written to a
temporary folder and removed after), and a fresh ``target/manifest.json`` so no dbt
runs. The DAG file is loaded through the dbt expander in a child process
(tests/support/dbt_load.py), which reports its peak RSS above what its imports took:
the seed counts by its path, so the load grows by a few MB, not by the seed's size.

    python benchmarks/bench_dbt_seed.py [--mb 300] [--source DIR]

``--source`` loads with another checkout's ``leoflow`` (e.g. ``git archive`` of an
older commit unpacked in DIR), to compare before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.dbt.test_project import MANIFEST
from tests.support.dbt_load import load_in_child


def build(root: Path, mb: int) -> Path:
    project = root / "seedy"
    for folder in ("models", "seeds", "target"):
        (project / folder).mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: seedy\nprofile: seedy\n")
    (project / "models" / "a.sql").write_text("select 1\n")
    row = b"12345,some customer name,2024-01-01,42.50\n"
    block = row * ((1 << 20) // len(row) + 1)
    with open(project / "seeds" / "big.csv", "wb") as seed:
        seed.write(b"id,name,day,amount\n")
        while seed.tell() < mb << 20:
            seed.write(block)
    shipped = project / "target" / "manifest.json"
    shipped.write_text(json.dumps(MANIFEST))
    stamp = time.time() + 60
    os.utime(shipped, (stamp, stamp))
    dag = root / "dag.yaml"
    dag.write_text("dag_id: seedy\ndbt:\n  project_dir: seedy\n  executable: /nonexistent/dbt\n")
    return dag


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--source", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dbt-seed-") as tmp:
        root = Path(tmp)
        dag = build(root, args.mb)
        result = load_in_child(dag, root / "cache", timeout=600.0, source=args.source)
    grew_mb = round(result.pop("grew_kb") / 1024, 1)
    print(json.dumps({"seed_mb": args.mb, "grew_mb": grew_mb, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
