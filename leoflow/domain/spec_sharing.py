"""One copy of what a parsed spec's tasks have in common.

A stored spec is JSON with every field written out, so a ``DagSpec`` read back
from it has, in each task, its own set of the field names given (all eighteen:
728 bytes), and its own ``Resources`` (two ``ResourceAmounts``) and ``Execution``,
each with a set of its own: ~4 KB a task, 40 MB for a 10,000-task DAG held by the
scheduler. The models are frozen, so tasks can share equal parts: after
``share_parts`` each distinct part and field-name set exists once. Equality, hashes
and dumps are unchanged (``model_copy`` copies the set before it adds to it). Pure.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from leoflow.domain.dag import DagSpec, TaskSpec


class _Shelf:
    """Equal values, one object each."""

    def __init__(self) -> None:
        self._names: dict[frozenset[str], set[str]] = {}
        self._parts: dict[Any, BaseModel] = {}

    def names(self, model: BaseModel) -> None:
        given = model.__pydantic_fields_set__
        key = frozenset(given)
        shared = self._names.setdefault(key, given)
        if shared is not given:
            object.__setattr__(model, "__pydantic_fields_set__", shared)

    def part(self, model: BaseModel) -> BaseModel:
        try:
            key = (type(model), model)
            return self._parts.setdefault(key, model)
        except TypeError:  # a dict or list inside (node_selector, affinity): keep its own
            return model


def read_shared(spec_json: str) -> DagSpec:
    """Parse a stored spec with its tasks' equal parts shared from the start.

    Task by task, each shared as soon as it is made: parsed whole first, a
    10,000-task spec held all its unshared tasks at once (a 41 MB peak, for 9 MB
    kept), and a peak stays in the process's RSS. A spec that does not validate this
    way is parsed again whole, for pydantic's own error with its full location."""
    raw = json.loads(spec_json)
    tasks_raw = raw.get("tasks") if isinstance(raw, dict) else None
    if not isinstance(tasks_raw, dict):
        return share_parts(DagSpec.model_validate_json(spec_json))
    shelf = _Shelf()
    tasks: dict[str, TaskSpec] = {}
    try:
        for task_id in list(tasks_raw):
            task = TaskSpec.model_validate(tasks_raw.pop(task_id))
            _share_task(task, shelf)
            tasks[task_id] = task
        raw["tasks"] = tasks
        return DagSpec.model_validate(raw)
    except ValidationError:
        return share_parts(DagSpec.model_validate_json(spec_json))


def share_parts(spec: DagSpec) -> DagSpec:
    """Make the tasks of ``spec`` share equal sub-models and field-name sets, in place;
    returns ``spec``."""
    shelf = _Shelf()
    for task in spec.tasks.values():
        _share_task(task, shelf)
    return spec


def _share_task(task: TaskSpec, shelf: _Shelf) -> None:
    shelf.names(task)
    fields = task.__dict__
    resources = task.resources
    for amounts in (resources.requests, resources.limits):
        shelf.names(amounts)
    shelf.names(resources)
    shared = shelf.part(resources)
    if shared is resources:  # the first of its kind: share what is inside it
        resources.__dict__["requests"] = shelf.part(resources.requests)
        resources.__dict__["limits"] = shelf.part(resources.limits)
    fields["resources"] = shared
    shelf.names(task.execution)
    fields["execution"] = shelf.part(task.execution)
