"""The settings the environment gives: ``LEOFLOW_<NAME>``, and ``LEOFLOW_<NAME>__<FIELD>``
for one field of a nested setting, read as pydantic-settings read them before.

pydantic-settings cost a ``leoflow run`` ~4% of its CPU (its import, and a pass over
every field's type for each load) for the few rules used here:

- names are case-insensitive; variables that name no setting are ignored;
- a structured setting (a mapping, a list, a nested model) is JSON, unless its type
  is marked ``NoDecode`` (its validator splits a comma-separated string instead);
- ``LEOFLOW_A__B=v`` sets field ``b`` of setting ``a``, over whatever
  ``LEOFLOW_A`` (JSON) says; anything else is handed over as the string it is.

Imports pydantic and the stdlib only, like ``leoflow.settings``.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

PREFIX = "leoflow_"
NESTED = "__"
_STRUCTURED = (BaseModel, dict, list, tuple, set, frozenset, Mapping)


class NoDecode:
    """``Annotated[T, NoDecode]``: the environment's string goes to the validator as is."""


def _is_structured(field: FieldInfo) -> bool:
    if any(item is NoDecode for item in field.metadata):
        return False
    annotation = field.annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(annotation)
    else:
        members = (annotation,)
    for member in members:
        kind = typing.get_origin(member) or member
        if isinstance(kind, type) and issubclass(kind, _STRUCTURED):
            return True
    return False


def environment_values(
    model: type[BaseModel], environ: Mapping[str, str], error: type[Exception]
) -> dict[str, Any]:
    """The values ``environ`` sets for ``model``'s fields; ``error`` for malformed JSON."""
    lowered = {name.lower(): value for name, value in environ.items()}
    if not any(name.startswith(PREFIX) for name in lowered):
        return {}
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = PREFIX + name
        raw = lowered.get(key)
        if not _is_structured(field):
            if raw is not None:
                values[name] = raw
            continue
        value: Any = raw
        if raw is not None:
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise error(
                    f"setting {name!r} (env {key.upper()}): expected JSON, got {raw!r} ({exc})"
                ) from None
        nested = _nested(lowered, key + NESTED)
        if nested:
            value = {**value, **nested} if isinstance(value, dict) else nested
        if value is not None:
            values[name] = value
    return values


def _nested(lowered: Mapping[str, str], start: str) -> dict[str, Any]:
    """``{start}b__c=v`` as ``{"b": {"c": "v"}}``."""
    found: dict[str, Any] = {}
    for name, value in lowered.items():
        if not name.startswith(start) or len(name) == len(start):
            continue
        *path, last = name[len(start) :].split(NESTED)
        into = found
        for part in path:
            into = into.setdefault(part, {})
            if not isinstance(into, dict):
                break
        else:
            into[last] = value
    return found
