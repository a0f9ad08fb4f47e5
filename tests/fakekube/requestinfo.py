"""Turn a method + URL into the apiserver's request attributes (verb, group, resource...).

The same resolution the real apiserver does before authorization, so RBAC checks,
counters and 403 messages name requests exactly as Kubernetes would: a GET on a
collection is ``list``, with ``watch=true`` it is ``watch``, a GET on
``pods/x/log`` is ``get`` on resource ``pods/log``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .faults import RequestInfo

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def is_watch(query: Mapping[str, str]) -> bool:
    """``watch=true`` or ``watch=1`` (both accepted by the apiserver)."""
    return query.get("watch", "").lower() in ("true", "1")


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo | None:
    """The request's attributes, or None for a non-resource path (``/version``...)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    if method == "GET":
        verb = "get" if name else ("watch" if is_watch(query) else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return RequestInfo(verb, group, resource, namespace, name, path)
