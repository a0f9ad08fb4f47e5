"""The JSON Schema of a ``leoflow.yaml`` file, generated from the DAG models.

Editors complete and check DAG files with it (``# yaml-language-server:
$schema=...``); ``leoflow dags schema`` prints the copy shipped in the package,
``leoflow.schema.json`` beside this module, which a test keeps equal to what
``dag_file_schema()`` generates. It says what JSON Schema can: fields, types, ranges,
patterns and enums. The loader checks the rest (a cron expression, a time zone, that
each ``depends_on`` names a task, that a pool exists, cycles) and names the line.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import models_json_schema

from leoflow.domain.dag import TASK_ID_PATTERN, DagSpec, TaskFields

SHIPPED = "leoflow.schema.json"
# As leoflow.domain.durations reads them: seconds, or 500ms, 30s, 1h30m, 2d.
DURATION = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?(ms|s|m|h|d)\s*)+$"},
    ],
    "description": "seconds, or a duration such as 500ms, 30s, 5m, 2h, 1d",
}
DURATION_FIELDS = {"retry_delay", "timeout", "deadline", "run_timeout", "idle_timeout"}
QUANTITY = {
    "anyOf": [
        {
            "type": "string",
            "pattern": r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?$",
        },
        {"type": "number", "minimum": 0},
    ],
    "description": "a Kubernetes quantity such as 500m, 2, 1Gi or 512Mi",
}
QUANTITY_FIELDS = {"cpu", "memory", "ephemeral_storage"}
_ASSET = {"type": "string", "minLength": 1, "description": "an asset URI or a plain name"}
_CONDITION: dict[str, Any] = {
    "anyOf": [
        {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/AssetCondition"}},
        {
            "type": "object",
            "properties": {
                "all": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/AssetCondition"}}
            },
            "required": ["all"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "any": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/AssetCondition"}}
            },
            "required": ["any"],
            "additionalProperties": False,
        },
    ],
    "description": "a list (all of), {all: [...]} or {any: [...]}, nested as needed",
}
_ASSET_CONDITION = {
    "anyOf": [_ASSET, *_CONDITION["anyOf"]],
    "description": _CONDITION["description"],
}
SCHEDULE = {
    "anyOf": [
        {"type": "string", "description": "a cron expression"},
        {
            "type": "object",
            "properties": {
                "cron": {"type": "string", "description": "a cron expression"},
                "assets": {"$ref": "#/$defs/AssetCondition"},
            },
            "minProperties": 1,
            "additionalProperties": False,
            "description": "assets: a run once they have new events; with cron, either fires",
        },
        {"type": "null"},
    ]
}
# YAML reads `WORKERS: 4` as a number; the loader makes every env value a string.
ENV_VALUE = {"type": ["string", "number", "boolean"]}


def _optional(schema: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or null where the field was optional."""
    nullable = {"type": "null"} in original.get("anyOf", [])
    return {"anyOf": [*schema["anyOf"], {"type": "null"}]} if nullable else dict(schema)


def _fix_fields(definition: dict[str, Any]) -> None:
    """What a model's field types cannot say: durations and quantities as written."""
    for name, prop in definition.get("properties", {}).items():
        if name in DURATION_FIELDS:
            definition["properties"][name] = _optional(DURATION, prop)
        elif name in QUANTITY_FIELDS:
            definition["properties"][name] = _optional(QUANTITY, prop)
        elif name == "env":
            for option in [prop, *prop.get("anyOf", [])]:
                if "additionalProperties" in option:
                    option["additionalProperties"] = ENV_VALUE


def dag_file_schema() -> dict[str, Any]:
    """The schema of one DAG file: the DAG's fields, ``defaults`` and the tasks as
    written (no ``task_id``: the key is the id; ``command`` may come from defaults)."""
    _, top = models_json_schema(
        [(DagSpec, "validation"), (TaskFields, "validation")], ref_template="#/$defs/{model}"
    )
    defs: dict[str, Any] = top["$defs"]
    dag = defs.pop("DagSpec")
    task = defs.pop("TaskSpec")
    task["properties"].pop("task_id")
    task["required"] = [r for r in task.get("required", []) if r not in {"task_id", "command"}]
    if not task["required"]:
        task.pop("required")
    task["title"] = "Task"
    defs["Task"] = task
    for definition in defs.values():
        _fix_fields(definition)
    _fix_fields(dag)
    props = dag["properties"]
    props["tasks"] = {
        "type": "object",
        "propertyNames": {"pattern": TASK_ID_PATTERN},
        "additionalProperties": {"$ref": "#/$defs/Task"},
        "description": "task id -> task; the id is the key",
    }
    props["defaults"] = {
        "$ref": "#/$defs/TaskFields",
        "description": "any task field, applied where a task is silent",
    }
    props["pools"]["additionalProperties"] = False
    props.pop("asset_schedule")  # written as schedule: {assets: ...}
    props["schedule"] = SCHEDULE
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "leoflow.yaml",
        "description": "One Leoflow DAG (generated from leoflow.domain.dag; see README)",
        "type": "object",
        "properties": props,
        "required": ["dag_id"],
        "anyOf": [{"required": ["tasks"]}, {"required": ["dbt"]}],
        "additionalProperties": False,
        "$defs": dict(sorted({**defs, "AssetCondition": _ASSET_CONDITION}.items())),
    }


def schema_text(schema: dict[str, Any]) -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def shipped_schema() -> str:
    """The schema file in the package (what ``leoflow dags schema`` prints)."""
    from importlib.resources import files

    return files("leoflow.dagfile").joinpath(SHIPPED).read_text(encoding="utf-8")


if __name__ == "__main__":  # python -m leoflow.dagfile.schema > leoflow/dagfile/leoflow.schema.json
    print(schema_text(dag_file_schema()), end="")
