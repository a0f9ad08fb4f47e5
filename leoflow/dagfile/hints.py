"""What the loader adds to a problem so its author can fix it: the field name meant
by a near miss (``depends_ob`` -> ``depends_on``, as kubectl and dbt suggest), and
the unknown ``depends_on`` names a file has even while its fields fail to validate."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from leoflow.domain.assets.condition import ScheduleError, parse_schedule
from leoflow.domain.dag import DagSpec, TaskFields, TaskSpec


def _models(annotation: Any) -> Iterator[tuple[type[BaseModel], int]]:
    """The models inside a field's type, each with how many path parts lead to it
    (1 for the field itself, 2 through a dict's key or a list's index)."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, 1
    elif origin is typing.Annotated:
        yield from _models(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _models(arg)
    elif origin in (dict, list, tuple) or (
        isinstance(origin, type) and issubclass(origin, Mapping)
    ):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        for model, depth in _models(args[-1] if args else None):
            yield model, depth + 1


def _fields_at(parent: tuple[str, ...]) -> list[str]:
    """The field names a mapping at ``parent`` may have; empty when it is not a model."""
    if parent == ():
        return [*DagSpec.model_fields, "defaults"]
    if parent == ("defaults",):
        return list(TaskFields.model_fields)
    if len(parent) == 2 and parent[0] == "tasks":
        return [name for name in TaskSpec.model_fields if name != "task_id"]
    model: type[BaseModel] = DagSpec
    rest = list(parent)
    if rest[:1] == ["defaults"]:
        model, rest = TaskFields, rest[1:]
    elif rest[:1] == ["tasks"] and len(rest) > 2:
        model, rest = TaskSpec, rest[2:]
    while rest:
        field = model.model_fields.get(rest[0])
        found = list(_models(field.annotation)) if field is not None else []
        if not found or len(rest) < found[0][1]:
            return []
        model, rest = found[0][0], rest[found[0][1] :]
    return list(model.model_fields)


def did_you_mean(loc: tuple[str, ...]) -> str:
    """``; did you mean 'depends_on'?`` for an unknown field close to a known one."""
    if not loc:
        return ""
    close = difflib.get_close_matches(loc[-1], _fields_at(loc[:-1]), n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_upstreams(
    tasks: Mapping[Any, Any], also: Mapping[str, Any]
) -> list[tuple[tuple[str, ...], str]]:
    """Each ``depends_on`` entry naming no task of the file (nor of ``also``: its dbt
    tasks), read from the raw document so they are found beside field errors."""
    known = {str(k) for k in tasks} | set(also)
    names = ", ".join(sorted(known))
    out: list[tuple[tuple[str, ...], str]] = []
    for task_id, task in tasks.items():
        upstreams = task.get("depends_on") if isinstance(task, Mapping) else None
        if not isinstance(upstreams, list):
            continue
        for index, upstream in enumerate(upstreams):
            if isinstance(upstream, str) and upstream not in known:
                loc = ("tasks", str(task_id), "depends_on", str(index))
                out.append((loc, f"unknown task {upstream!r} (tasks in this DAG: {names})"))
    return out


def schedule_problems(raw: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """A ``schedule`` mapping's problems at their own field path (the spec's check says
    them too, but at the schedule as a whole)."""
    if "asset_schedule" in raw:
        return [(("asset_schedule",), "unknown field; write schedule: {assets: [...]}")]
    try:
        parse_schedule(raw.get("schedule"))
    except ScheduleError as exc:
        return [(("schedule", *exc.loc), exc.message)]
    return []
