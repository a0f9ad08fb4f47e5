"""Strict JSON: the guard refuses NaN/Infinity (Python's json accepts them) and
nesting deeper than a bound, without recursing itself."""

from __future__ import annotations

import json
import math
from typing import Any

DEPTH_SETTING = "api_json_max_depth (LEOFLOW_API_JSON_MAX_DEPTH)"


class _NotStrictJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotStrictJson(f"{name} is not JSON (only finite numbers are)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: valid JSON syntax, but no finite number
        raise _NotStrictJson(f"{text[:40]} is out of range (only finite numbers are)")
    return value


def check_strict_json(body: bytes, max_depth: int) -> str | None:
    """Why ``body`` is refused (NaN/Infinity, nesting deeper than ``max_depth``), or
    None. Syntax errors are left to the route, which reports them with their place."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotStrictJson as exc:
        return str(exc)
    except RecursionError:
        return f"the JSON body nests deeper than {max_depth} levels ({DEPTH_SETTING})"
    except ValueError:
        return None
    # Iterative: the depth bound must not itself recurse.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"the JSON body nests deeper than {max_depth} levels ({DEPTH_SETTING})"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None
