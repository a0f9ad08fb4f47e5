"""Label and field selectors with the apiserver's grammar.

The pod cache lists and watches with a label selector; a fake that ignored it would
hide a cache that sees other teams' pods. Grammar (k8s.io/apimachinery/pkg/labels):
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists),
``!k`` (does not exist), requirements joined by commas. ``!=`` and ``notin`` also
match objects without the key, as the real selector does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .status import bad_request

_IN_RE = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_OP_RE = re.compile(r"^\s*([^\s!=(),]+)\s*(==|!=|=)\s*([^\s!=(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One clause of a label selector."""

    key: str
    op: str  # "in", "notin", "exists", "!exists"  (= and == become "in", != becomes "notin")
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfies this clause."""
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "in":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


def _split_clauses(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    clauses: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            clauses.append(current)
            current = ""
        else:
            current += ch
    clauses.append(current)
    return [c for c in clauses if c.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a ``labelSelector`` query value; a bad one is a 400 as on the real server."""
    if not text:
        return []
    reqs: list[Requirement] = []
    for clause in _split_clauses(text):
        if m := _IN_RE.match(clause):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), values))
        elif m := _OP_RE.match(clause):
            op = "notin" if m.group(2) == "!=" else "in"
            reqs.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
        elif m := _EXISTS_RE.match(clause):
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists", frozenset()))
        else:
            raise bad_request(f"unable to parse requirement: {clause.strip()!r}")
    return reqs


def labels_match(reqs: list[Requirement], obj: Mapping[str, Any]) -> bool:
    """Whether the object's ``metadata.labels`` satisfy every requirement."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    return "" if node is None else str(node)


# Fields the real apiserver lets you select pods by (pod registry's field set).
POD_FIELDS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
GENERIC_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


def parse_field_selector(
    text: str | None, allowed: frozenset[str]
) -> Callable[[Mapping[str, Any]], bool]:
    """Parse ``fieldSelector`` (``=``, ``==``, ``!=``, comma-joined) into a predicate."""
    clauses: list[tuple[str, bool, str]] = []
    for clause in _split_clauses(text or ""):
        m = _OP_RE.match(clause)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{clause}'")
        field, op, value = m.groups()
        if field not in allowed:
            raise bad_request(f"field label not supported: {field}")
        clauses.append((field, op != "!=", value))

    def predicate(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, f) == v) == eq for f, eq, v in clauses)

    return predicate
