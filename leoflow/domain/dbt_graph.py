"""A dbt manifest as a graph, and dbt's node selection over it (``--select`` syntax).

Pure, like the rest of the dbt translation in ``leoflow.domain.dbt``: it works on a
``manifest.json`` already parsed into a dict. The methods supported are
``SUPPORTED_METHODS``, with dbt's graph operators (``+``, ``N+``, ``@``), names, paths
and fqn wildcards; anything else is a ``SelectorError`` naming what is supported.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

_GRAPH = re.compile(r"^(?P<at>@)?(?:(?P<up>\d*)\+)?(?P<body>[^+@]+?)(?:\+(?P<down>\d*))?$")
SUPPORTED_METHODS = ("fqn", "tag", "path", "source", "resource_type", "package")


class SelectorError(ValueError):
    """A selector Leoflow cannot evaluate, or one that matches nothing."""


class Graph:
    """The part of a manifest selection and dependencies need, indexed once."""

    def __init__(self, manifest: Mapping[str, Any]) -> None:
        nodes = manifest.get("nodes") or {}
        sources = manifest.get("sources") or {}
        self.nodes: dict[str, Mapping[str, Any]] = {**nodes, **sources}
        self.project = str((manifest.get("metadata") or {}).get("project_name") or "")
        self.parents: dict[str, list[str]] = {}
        for uid, node in self.nodes.items():
            deps = (node.get("depends_on") or {}).get("nodes") or []
            self.parents[uid] = [d for d in deps if d in self.nodes]
        self.kinds: dict[str, str] = {
            uid: str(node.get("resource_type") or uid.split(".", 1)[0])
            for uid, node in self.nodes.items()
        }
        self.children: dict[str, list[str]] = {uid: [] for uid in self.nodes}
        for uid, ups in self.parents.items():
            for up in ups:
                self.children[up].append(uid)

    def resource_type(self, uid: str) -> str:
        return self.kinds[uid]

    def name(self, uid: str) -> str:
        node = self.nodes[uid]
        if self.resource_type(uid) == "source":
            return f"{node.get('source_name')}.{node.get('name')}"
        return str(node.get("name") or uid.rsplit(".", 1)[-1])

    def walk(self, start: Iterable[str], up: bool, depth: int | None) -> set[str]:
        edges = self.parents if up else self.children
        seen: set[str] = set()
        frontier = list(start)
        level = 0
        while frontier and (depth is None or level < depth):
            level += 1
            nxt: list[str] = []
            for uid in frontier:
                for other in edges[uid]:
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
        return seen


def _method_matches(graph: Graph, method: str, value: str, uid: str) -> bool:
    node = graph.nodes[uid]
    kind = graph.resource_type(uid)
    if method == "tag":
        tags = set(node.get("tags") or ()) | set((node.get("config") or {}).get("tags") or ())
        return any(fnmatch.fnmatchcase(tag, value) for tag in tags)
    if method == "resource_type":
        return kind == value
    if method == "package":
        return fnmatch.fnmatchcase(str(node.get("package_name") or ""), value)
    if method == "path":
        path = str(node.get("original_file_path") or "")
        want = value.rstrip("/")
        return (
            path == want
            or path.startswith(want + "/")
            or fnmatch.fnmatchcase(path, value)
            or path.rsplit(".", 1)[0] == want
        )
    if method == "source":
        if kind != "source":
            return False
        parts = value.split(".")
        src, table = str(node.get("source_name")), str(node.get("name"))
        package = str(node.get("package_name") or "")
        if len(parts) == 1:
            return fnmatch.fnmatchcase(src, parts[0])
        if len(parts) == 2:
            return fnmatch.fnmatchcase(src, parts[0]) and fnmatch.fnmatchcase(table, parts[1])
        return (
            len(parts) == 3
            and fnmatch.fnmatchcase(package, parts[0])
            and fnmatch.fnmatchcase(src, parts[1])
            and fnmatch.fnmatchcase(table, parts[2])
        )
    # fqn: a bare name, a package, or a dotted fqn prefix; * wildcards per part.
    if kind == "source":
        return False
    fqn = [str(p) for p in node.get("fqn") or [graph.name(uid)]]
    parts = value.split(".")
    if len(parts) == 1:
        return fnmatch.fnmatchcase(fqn[-1], value) or fnmatch.fnmatchcase(fqn[0], value)
    if len(parts) > len(fqn):
        return False
    return all(fnmatch.fnmatchcase(have, want) for have, want in zip(fqn, parts, strict=False))


def _atom(graph: Graph, text: str) -> set[str]:
    match = _GRAPH.match(text)
    if not match:
        raise SelectorError(f"cannot read {text!r}: expected [@][N+]method:value[+N]")
    body = match["body"]
    if ":" in body:
        method, _, value = body.partition(":")
    elif "/" in body or body.endswith((".sql", ".py", ".csv")):
        method, value = "path", body
    else:
        method, value = "fqn", body
    if method not in SUPPORTED_METHODS:
        raise SelectorError(
            f"selector method {method!r} (in {text!r}) is not supported; Leoflow evaluates "
            f"{', '.join(m + ':' for m in SUPPORTED_METHODS)} names, paths and fqn wildcards, "
            f"with +, N+, +N and @ graph operators, spaces (union) and commas (intersection)"
        )
    if not value:
        raise SelectorError(f"selector {text!r} has no value after {method}:")
    base = {uid for uid in graph.nodes if _method_matches(graph, method, value, uid)}
    out = set(base)
    if match["at"]:
        down = graph.walk(base, up=False, depth=None)
        out |= down | graph.walk(base | down, up=True, depth=None)
        return out
    if match["up"] is not None:
        out |= graph.walk(base, up=True, depth=int(match["up"]) if match["up"] else None)
    if match["down"] is not None:
        out |= graph.walk(base, up=False, depth=int(match["down"]) if match["down"] else None)
    return out


def select(graph: Graph, expressions: Iterable[str]) -> set[str]:
    """The union of dbt selector expressions (space: union, comma: intersection)."""
    chosen: set[str] = set()
    for expression in expressions:
        for term in expression.split():
            parts = [p for p in term.split(",") if p]
            if not parts:
                continue
            found = _atom(graph, parts[0])
            for part in parts[1:]:
                found &= _atom(graph, part)
            chosen |= found
    return chosen
