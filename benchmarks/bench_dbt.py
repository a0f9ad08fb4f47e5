"""Loading a DAG whose dbt project has 1,000 models (target: <= 1 s), as JSON.

A generated project (one .sql file per model, so the fingerprint has files to hash)
with a generated ``manifest.json`` of the shape dbt 1.x writes: 1,000 models in
layers of 50, each reading two models of the layer above, 2 tests per model, 20
seeds and a source fed by an ordinary task. Timed: ``load_dag_file`` through the
dbt expander, cold (the project's own target/manifest.json, then cached) and warm
(the cache). No dbt runs here: the manifest is what ``dbt parse`` would leave.

    python benchmarks/bench_dbt.py [--models N]

``--overhead`` also measures what a task per node costs against one ``dbt build``
on the shop fixture project (needs ``make dbt-venv``): whole-run seconds, median of
``--repeat``, of one ``dbt build``, of ``leoflow run`` with a task per node, and of
the same with ``dbt.batch: wave`` (``--modes build,per_model,wave`` picks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leoflow.dagfile.loader import LoadOptions, load_dag_file
from leoflow.dbt.project import expander

LAYER = 50


def _node(kind: str, name: str, deps: list[str], folder: str) -> dict[str, Any]:
    sql = f"select * from {' join '.join(deps) or 'seed'}"
    return {
        "resource_type": kind,
        "name": name,
        "package_name": "big",
        "unique_id": f"{kind}.big.{name}",
        "fqn": ["big", folder, name],
        "tags": ["nightly"] if kind == "model" else [],
        "original_file_path": f"models/{folder}/{name}.sql",
        "path": f"{folder}/{name}.sql",
        "raw_code": sql,
        "checksum": {"name": "sha256", "checksum": "0" * 64},
        "depends_on": {"nodes": deps, "macros": []},
        "config": {"materialized": "table", "enabled": True, "tags": []},
        "columns": {"id": {"name": "id", "description": "", "data_type": None}},
        "description": f"The {name} model, generated for the benchmark.",
    }


def build(root: Path, models: int) -> Path:
    project = root / "big"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: big\nversion: '1'\nprofile: big\n")
    nodes: dict[str, Any] = {}
    for i in range(20):
        nodes[f"seed.big.seed_{i}"] = _node("seed", f"seed_{i}", [], "seeds")
    for i in range(models):
        layer, index = divmod(i, LAYER)
        if layer == 0:
            deps = ["source.big.shop.orders", f"seed.big.seed_{index % 20}"]
        else:
            above = (layer - 1) * LAYER
            deps = [f"model.big.m_{above + index}", f"model.big.m_{above + (index + 7) % LAYER}"]
        name = f"m_{i}"
        folder = f"layer_{layer}"
        nodes[f"model.big.{name}"] = _node("model", name, deps, folder)
        for test in ("not_null", "unique"):
            test_name = f"{test}_{name}_id"
            nodes[f"test.big.{test_name}.abc123"] = _node(
                "test", test_name, [f"model.big.{name}"], folder
            )
        sql = project / "models" / folder / f"{name}.sql"
        sql.parent.mkdir(exist_ok=True)
        sql.write_text(nodes[f"model.big.{name}"]["raw_code"])
    manifest = {
        "metadata": {"project_name": "big", "dbt_version": "1.11.16"},
        "nodes": nodes,
        "sources": {
            "source.big.shop.orders": {
                "resource_type": "source",
                "name": "orders",
                "source_name": "shop",
                "package_name": "big",
                "fqn": ["big", "shop", "orders"],
                "original_file_path": "models/sources.yml",
            }
        },
        "macros": {},
        "parent_map": {uid: n["depends_on"]["nodes"] for uid, n in nodes.items()},
    }
    (project / "target").mkdir()
    target = project / "target" / "manifest.json"
    target.write_text(json.dumps(manifest))
    future = time.time() + 60
    os.utime(target, (future, future))  # newer than every project file: it is fresh
    dag = root / "big.yaml"
    dag.write_text(
        "dag_id: big\ntasks:\n  extract: {command: 'echo extract'}\n"
        "dbt:\n  project_dir: big\n  depends_on: {'source:shop.orders': [extract]}\n"
    )
    return dag


def overhead(modes: list[str], repeat: int) -> dict[str, Any]:
    """Whole-run seconds of the shop project, median of ``repeat``, for each mode:
    ``build`` one ``dbt build``; ``per_model`` and ``wave`` ``leoflow run`` with a task
    per node (``dbt.batch`` none / wave, ``max_active_tasks: 1`` as DuckDB needs)."""
    import shutil
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    fixtures = repo / "tests" / "fixtures" / "dbt"
    dbt = repo / ".venv-dbt" / "bin" / "dbt"
    leoflow = repo / ".venv" / "bin" / "leoflow"
    extract = [str(dbt.parent / "python"), str(fixtures / "extract_orders.py")]
    out: dict[str, Any] = {"project": "tests/fixtures/dbt/shop", "repeat": repeat}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("shop", "profiles"):
            shutil.copytree(fixtures / name, root / name)
        home = {**os.environ, "LEOFLOW_HOME": str(root / "home")}
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        nodes = 0
        for attempt in range(repeat):
            for mode in modes:
                database = str(root / f"{mode}-{attempt}.duckdb")
                subprocess.run([*extract, database], check=True, capture_output=True)
                if mode == "build":
                    env = {
                        **os.environ,
                        "SHOP_DUCKDB_PATH": database,
                        "LEOFLOW_SECRET_WAREHOUSE_PASSWORD": "x",
                        "DBT_TARGET_PATH": str(root / "target"),
                        "DBT_LOG_PATH": str(root / "logs"),
                    }
                    argv = [str(dbt), "build", "--project-dir", str(root / "shop")]
                    argv += ["--profiles-dir", str(root / "profiles")]
                    started = time.perf_counter()
                    subprocess.run(argv, env=env, check=True, capture_output=True)
                    times[mode].append(time.perf_counter() - started)
                    continue
                dag = root / f"shop_{mode}.yaml"
                dag.write_text(
                    f"dag_id: bench_shop_{mode}\nmax_active_tasks: 1\ntasks:\n"
                    f"  extract_orders: {{command: {json.dumps([*extract, database])}}}\n"
                    f"dbt:\n  project_dir: shop\n  profiles_dir: profiles\n"
                    f"  executable: {dbt}\n  tests: after_all\n"
                    f"  batch: {'wave' if mode == 'wave' else 'none'}\n"
                    f"  depends_on: {{'source:shop.orders': [extract_orders]}}\n"
                    f"  defaults: {{env: {{SHOP_DUCKDB_PATH: '{database}', "
                    f"LEOFLOW_SECRET_WAREHOUSE_PASSWORD: x}}}}\n"
                )
                # The load-time dbt parse is not part of the figure.
                check = [str(leoflow), "dags", "validate", str(dag)]
                subprocess.run(check, env=home, check=True, capture_output=True)
                started = time.perf_counter()
                done = subprocess.run(
                    [str(leoflow), "run", str(dag)], env=home, capture_output=True, text=True
                )
                times[mode].append(time.perf_counter() - started)
                if done.returncode != 0:
                    raise SystemExit(f"{mode} run failed:\n{done.stdout}{done.stderr}")
                nodes = sum(1 for line in done.stdout.splitlines() if line.startswith("dbt."))
    for mode, values in times.items():
        out[f"{mode}_s_median"] = round(statistics.median(values), 1)
        out[f"{mode}_s_all"] = [round(v, 1) for v in values]
    out["dbt_nodes_as_tasks"] = nodes
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument(
        "--modes", default="build,per_model,wave", help="with --overhead: which to time"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dag = build(root, args.models)
        options = LoadOptions(dbt=expander(root / "cache"))
        started = time.perf_counter()
        loaded = load_dag_file(dag, options)
        first = time.perf_counter() - started
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            load_dag_file(dag, options)
            times.append(time.perf_counter() - started)
        size = (root / "big" / "target" / "manifest.json").stat().st_size
    result = {
        "benchmark": "dbt_load",
        "models": args.models,
        "tasks": len(loaded.spec.tasks),
        "manifest_bytes": size,
        "first_load_s": round(first, 3),
        "load_s_median": round(statistics.median(times), 3),
        "load_s_max": round(max(times), 3),
        "target_s": 1.0,
        "within_target": max(first, *times) <= 1.0,
    }
    if args.overhead:
        result["overhead"] = overhead(args.modes.split(","), args.repeat)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
