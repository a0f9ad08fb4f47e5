"""The part of a dbt manifest that selection reads, compact enough to keep in a DAG's spec.

A run triggered with a dbt selector (``leoflow.domain.dbt_run_select``) is resolved
where no project is on disk (the API), so the DAG keeps this in ``dbt.graph``. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from leoflow.domain.dbt_graph import Graph


def compact_graph(graph: Graph, tasks: Mapping[str, str]) -> dict[str, Any]:
    """What selection reads of a manifest, small enough to keep in the DAG's spec.

    ``nodes``: uid -> [resource_type, name, package, fqn, tags, path, source_name,
    parents]; ``tasks``: task id -> the uid it runs.
    """
    nodes: dict[str, list[Any]] = {}
    for uid, node in graph.nodes.items():
        config = node.get("config") or {}
        tags = sorted({*(node.get("tags") or ()), *(config.get("tags") or ())})
        nodes[uid] = [
            graph.resource_type(uid),
            str(node.get("name") or ""),
            str(node.get("package_name") or ""),
            [str(p) for p in node.get("fqn") or ()],
            tags,
            str(node.get("original_file_path") or ""),
            node.get("source_name"),
            graph.parents[uid],
        ]
    return {"project": graph.project, "nodes": nodes, "tasks": dict(tasks)}


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


# resource_type, name, package, fqn, tags, path, source_name, parents
_NODE_SHAPE: tuple[Callable[[object], bool], ...] = (
    _text, _text, _text, _strings, _strings, _text, _text_or_none, _strings,
)  # fmt: skip


def compact_problem(compact: object) -> str | None:
    """What is wrong with a ``dbt.graph`` a document carries (``leoflow dags apply``
    sends it), so that a malformed one is a load error, not a failed trigger."""
    if not isinstance(compact, dict):
        return "expected the mapping `leoflow dags apply` writes"
    nodes, tasks = compact.get("nodes"), compact.get("tasks")
    if not isinstance(compact.get("project", ""), str):
        return "project: expected a string"
    if not isinstance(nodes, dict):
        return "nodes: expected a mapping of node id to its fields"
    for uid, fields in nodes.items():
        if not (
            isinstance(fields, list)
            and len(fields) == len(_NODE_SHAPE)
            and all(ok(v) for ok, v in zip(_NODE_SHAPE, fields, strict=True))
        ):
            return f"nodes.{uid}: expected [type, name, package, fqn, tags, path, source, parents]"
    if not isinstance(tasks, dict) or not all(
        isinstance(t, str) and isinstance(u, str) for t, u in tasks.items()
    ):
        return "tasks: expected a mapping of task id to node id"
    return None


def graph_of(compact: Mapping[str, Any]) -> Graph:
    nodes: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    for uid, (kind, name, package, fqn, tags, path, source, parents) in compact["nodes"].items():
        node = {
            "resource_type": kind,
            "name": name,
            "package_name": package,
            "fqn": fqn,
            "tags": tags,
            "original_file_path": path,
            "depends_on": {"nodes": parents},
        }
        if source is not None:
            node["source_name"] = source
        (sources if kind == "source" else nodes)[uid] = node
    manifest = {"metadata": {"project_name": compact.get("project")}}
    return Graph({**manifest, "nodes": nodes, "sources": sources})
