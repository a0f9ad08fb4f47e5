"""Where a DAG names assets: its tasks' ``produces``/``consumes`` and its schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leoflow.domain.assets.condition import condition_uris

PRODUCES, CONSUMES, SCHEDULE = "produces", "consumes", "schedule"


def spec_refs(spec: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(uri, role, task_id)`` of a DAG spec as JSON (a stored ``spec_json``, parsed);
    the schedule's rows have task_id ``""``."""
    out: list[tuple[str, str, str]] = []
    for task_id, task in (spec.get("tasks") or {}).items():
        for role in (PRODUCES, CONSUMES):
            out += [(str(uri), role, str(task_id)) for uri in task.get(role) or ()]
    condition = spec.get("asset_schedule")
    if condition:
        out += [(uri, SCHEDULE, "") for uri in condition_uris(condition)]
    return list(dict.fromkeys(out))
