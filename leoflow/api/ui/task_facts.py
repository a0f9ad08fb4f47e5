"""What the task page says of the task itself, from its DAG's spec: its command, the
NAMES of its environment variables and secrets (never their values), its resources
and limits, and what the instance handed on (its output, a mapped item's item)."""

from __future__ import annotations

import json
from typing import Any

from leoflow.domain.dag import DagSpec, ResourceAmounts, TaskSpec
from leoflow.domain.outputs import item_of
from leoflow.store.rows import TaskInstanceRow

# Shown in the page; the API's task instance has the whole value.
SHOWN_CHARS = 4000


def _amounts(a: ResourceAmounts) -> str:
    parts = [
        f"{name.replace('_', ' ')} {value}"
        for name, value in (
            ("cpu", a.cpu),
            ("memory", a.memory),
            ("ephemeral_storage", a.ephemeral_storage),
        )
        if value is not None
    ]
    return ", ".join(parts)


def _pretty(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        shown = text
    if len(shown) > SHOWN_CHARS:
        return (
            shown[:SHOWN_CHARS] + f"\n… ({len(shown) - SHOWN_CHARS} more characters: see the API)"
        )
    return shown


def spec_for(spec: DagSpec | None, task_id: str) -> TaskSpec | None:
    """The task's spec; a mapped item's (``fetch[3]``) is its mapped task's."""
    if spec is None:
        return None
    found = spec.tasks.get(task_id)
    if found is None and (item := item_of(task_id)) is not None:
        found = spec.tasks.get(item[0])
    return found


def task_facts(spec: DagSpec | None, ti: TaskInstanceRow) -> dict[str, Any]:
    task = spec_for(spec, ti.task_id)
    command = None
    if task is not None:
        command = task.command if isinstance(task.command, str) else json.dumps(list(task.command))
    return {
        "task_spec": task,
        "command_text": command,
        "env_names": sorted(task.env) if task is not None else [],
        "requests": _amounts(task.resources.requests) if task is not None else "",
        "limits": _amounts(task.resources.limits) if task is not None else "",
        "output_text": _pretty(ti.output),
        "item_text": _pretty(ti.map_item),
    }
