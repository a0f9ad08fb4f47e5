"""What a dbt task's OpenLineage events say of its datasets, read from dbt's own files.

A dbt task's dbt writes ``manifest.json`` and ``run_results.json`` into its own target
directory (``DBT_TARGET_PATH`` of the task's env, ``leoflow.domain.dbt.task_env``);
the project's ``target/manifest.json`` stands in until it has run. From them:

- the schema facet of each dataset: the columns the manifest documents (name,
  ``data_type``, description) of the node whose relation is the asset;
- the SQL job facet: the try's compiled SQL from ``run_results.json``, else the model's
  raw SQL from the manifest;
- the output statistics facet (row count) from ``run_results.json``'s
  ``adapter_response.rows_affected`` when the adapter reports it (DuckDB's table
  materialisations do not);
- column lineage: dbt-core's manifest has none (only ``depends_on`` between nodes), so
  an event carries a ``columnLineage`` facet only when a node's ``meta.column_lineage``
  maps an output column to ``[{asset, column}]`` (Leoflow's own convention).

Read by the lineage worker in a thread, never by the loop. A task run in a pod (Pro)
writes these files inside the pod, out of the scheduler's reach: its events carry the
project manifest's facts only. Files that are missing or unreadable give no facets.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_assets import adapter_of, relation_uri
from leoflow.domain.lineage import DatasetFacts, Subject

log = logging.getLogger("leoflow.lineage")

Facts = tuple[dict[str, DatasetFacts], str | None]
_KEPT = 8  # manifests kept parsed (by path and mtime)


class DbtFacts:
    def __init__(self) -> None:
        self._manifests: dict[tuple[str, int], dict[str, Any]] = {}

    async def read(self, spec: DagSpec, subject: Subject, complete: bool) -> Facts:
        task = spec.tasks.get(subject.task_id or "")
        if task is None or spec.dbt is None or not (task.produces or task.consumes):
            return {}, None
        target = task.env.get("DBT_TARGET_PATH")
        project = Path(spec.dbt.project_dir) / "target"
        return await asyncio.to_thread(
            self._read, subject, project, Path(target) if target else None, complete
        )

    def _read(self, subject: Subject, project: Path, target: Path | None, complete: bool) -> Facts:
        manifest = None
        for folder in (target, project):
            if folder is not None and (manifest := self._manifest(folder / "manifest.json")):
                break
        if manifest is None:
            return {}, None
        adapter = adapter_of(manifest)
        by_uri: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for section in ("nodes", "sources"):
            for uid, node in (manifest.get(section) or {}).items():
                if isinstance(node, Mapping) and (uri := relation_uri(node, adapter)):
                    by_uri.setdefault(uri, (uid, node))
        results = _results(target) if target is not None else {}
        facts: dict[str, DatasetFacts] = {}
        sql = None
        for uri in (*subject.inputs, *subject.outputs):
            found = by_uri.get(uri)
            if found is None:
                continue
            uid, node = found
            result = results.get(uid, {})
            rows = None
            if complete and uri in subject.outputs:
                rows = (result.get("adapter_response") or {}).get("rows_affected")
                if uri == subject.outputs[0]:
                    sql = result.get("compiled_code") or node.get("raw_code") or None
            facts[uri] = DatasetFacts(
                _columns(node),
                _column_lineage(node),
                rows if isinstance(rows, int) and rows >= 0 else None,
            )
        if sql is None and subject.outputs and (found := by_uri.get(subject.outputs[0])):
            sql = found[1].get("raw_code") or None
        return facts, None if sql is None else str(sql)

    def _manifest(self, path: Path) -> dict[str, Any] | None:
        try:
            key = (str(path), os.stat(path).st_mtime_ns)
        except OSError:
            return None
        if key in self._manifests:
            return self._manifests[key]
        loaded = _load(path)
        if loaded is not None:
            if len(self._manifests) >= _KEPT:
                self._manifests.pop(next(iter(self._manifests)))
            self._manifests[key] = loaded
        return loaded


def _load(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        log.info("no dbt facets from %s: %s", path, exc)
        return None
    return loaded if isinstance(loaded, dict) else None


def _results(target: Path) -> dict[str, Mapping[str, Any]]:
    loaded = _load(target / "run_results.json") or {}
    results = loaded.get("results")
    if not isinstance(results, list):
        return {}
    return {str(r["unique_id"]): r for r in results if isinstance(r, dict) and "unique_id" in r}


def _columns(node: Mapping[str, Any]) -> tuple[tuple[str, str | None, str | None], ...]:
    columns = node.get("columns")
    if not isinstance(columns, Mapping):
        return ()
    out = []
    for name, column in columns.items():
        column = column if isinstance(column, Mapping) else {}
        kind, text = column.get("data_type"), column.get("description")
        out.append((str(column.get("name") or name), kind and str(kind), text and str(text)))
    return tuple(out)


def _column_lineage(node: Mapping[str, Any]) -> dict[str, tuple[tuple[str, str], ...]]:
    meta = node.get("meta") or (node.get("config") or {}).get("meta") or {}
    declared = meta.get("column_lineage") if isinstance(meta, Mapping) else None
    if not isinstance(declared, Mapping):
        return {}
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for column, sources in declared.items():
        if isinstance(sources, list):
            pairs = tuple(
                (str(s["asset"]), str(s["column"]))
                for s in sources
                if isinstance(s, Mapping) and "asset" in s and "column" in s
            )
            if pairs:
                out[str(column)] = pairs
    return out
