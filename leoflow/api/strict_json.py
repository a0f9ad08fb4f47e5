"""Strict JSON: the guard refuses NaN/Infinity (Python's json accepts them), nesting
deeper than a bound, and text no store can hold (a lone UTF-16 surrogate, NUL),
without recursing itself."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
DEPTH_SETTING = "api_json_max_depth (LEOFLOW_API_JSON_MAX_DEPTH)"


class _NotStrictJson(ValueError):
    pass


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


def _refuse_constant(name: str) -> Any:
    raise _NotStrictJson(f"{name} is not JSON (only finite numbers are)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: valid JSON syntax, but no finite number
        raise _NotStrictJson(f"{text[:40]} is out of range (only finite numbers are)")
    return value


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored or served, or None. A ``"\\ud800"`` escape is valid
    JSON yet no UTF-8 text (SQLite, PostgreSQL and every response encode UTF-8), and
    PostgreSQL refuses NUL in text and jsonb alike."""
    if "\x00" in text:
        return "contains NUL (U+0000), which the database cannot store"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        return f"contains a lone UTF-16 surrogate (U+{code:04X}), which is not UTF-8 text"
    return None


def shown(text: str, limit: int = 60) -> str:
    """``text`` quoted and escaped to ASCII, so an answer can name it safely."""
    return json.dumps(text[:limit])


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{shown(key)}]"


def check_strict_json(body: bytes, max_depth: int) -> Refusal | None:
    """Why ``body`` is refused (NaN/Infinity and nesting too deep: 422; a string or
    key that is not storable text: 400 naming its field), or None. Syntax errors are
    left to the route, which reports them with their place."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotStrictJson as exc:
        return Refusal(422, str(exc))
    except RecursionError:
        return Refusal(422, f"the JSON body nests deeper than {max_depth} levels ({DEPTH_SETTING})")
    except ValueError:
        return None
    # Iterative: the depth bound must not itself recurse.
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            problem = unstorable(item)
            if problem is not None:
                return Refusal(400, f"field {path or '(the body)'}: the text {problem}")
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return Refusal(
                    422, f"the JSON body nests deeper than {max_depth} levels ({DEPTH_SETTING})"
                )
            if isinstance(item, list):
                stack.extend((child, depth + 1, _step(path, i)) for i, child in enumerate(item))
                continue
            for key, child in item.items():
                problem = unstorable(key)
                if problem is not None:
                    where = f"field {path}: a key" if path else "a key"
                    return Refusal(400, f"{where} {problem}")
                stack.append((child, depth + 1, _step(path, key)))
    return None
