"""The request target as text: a path or query parameter a store cannot hold (NUL,
which PostgreSQL refuses) or that is not UTF-8 once percent-decoded is refused at the
door. ASGI servers decode ``%ED%A0%80`` to U+FFFD silently; this says so instead."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import Scope

from leoflow.api.strict_json import shown, unstorable


def _decoded(raw: bytes, *, plus_is_space: bool) -> tuple[str | None, str]:
    """The text ``raw`` percent-decodes to, or None; and what is wrong with it."""
    text = raw.decode("latin-1")
    if plus_is_space:
        text = text.replace("+", " ")
    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        return None, "is not UTF-8 text once percent-decoded"
    problem = unstorable(decoded)
    return (None, problem) if problem is not None else (decoded, "")


def unstorable_target(scope: Scope) -> str | None:
    """Why the request's path or a query parameter is refused (the 400's detail), or None."""
    raw_path = scope.get("raw_path") or str(scope.get("path", "")).encode("utf-8", "replace")
    _, problem = _decoded(bytes(raw_path).partition(b"?")[0], plus_is_space=False)
    if problem:
        return f"the request path {problem}"
    for pair in bytes(scope.get("query_string", b"")).split(b"&"):
        raw_name, _, raw_value = pair.partition(b"=")
        name, problem = _decoded(raw_name, plus_is_space=True)
        if name is None:
            return f"a query parameter's name {problem}"
        _, problem = _decoded(raw_value, plus_is_space=True)
        if problem:
            return f"query parameter {shown(name)}: the value {problem}"
    return None
