"""A ``dbt:`` section resolved on the client, for a place with no project on disk (the API).

``leoflow dags apply`` reads the project beside the DAG file exactly as the Lite
loader does and sends the API a document in which the dbt nodes are already
ordinary tasks (``dbt.<node>``, with the command, env and dependencies the loader
made of them and every default applied), and the section as written plus a
``resolved`` record of where they came from. The API validates that document like
any DAG (the same ``parse_dag``) and never expands anything: what it stores is what
``leoflow run`` would have run, and the record says which manifest it was.

Pure: the caller reads the project and dumps the document as YAML.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Loc = tuple[str, ...]
RESOLVED_KEY = "resolved"


class DbtResolution(BaseModel):
    """Where a resolved section's tasks came from: shown in the DAG's detail."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    project: str = ""  # dbt's project name, from the manifest
    project_dir: str  # as the tasks' commands name it: where the DAG image must hold it
    tasks: tuple[str, ...] = Field(min_length=1)  # the task ids the nodes became

    @property
    def nodes(self) -> int:
        return len(self.tasks)


def manifest_sha256(manifest: Mapping[str, Any]) -> str:
    """The identity of the manifest the tasks were made from (its canonical JSON)."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def resolution_problems(resolution: DbtResolution, tasks: Collection[str]) -> list[tuple[Loc, str]]:
    """A resolved section must come with the tasks it names: a hand-edited one may not."""
    missing = [t for t in resolution.tasks if t not in tasks]
    if not missing:
        return []
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return [
        (
            ("dbt", RESOLVED_KEY, "tasks"),
            f"names dbt tasks the document does not define ({shown}); resolve the DAG file "
            f"again with `leoflow dags apply FILE`",
        )
    ]


def task_mapping(task: BaseModel, default_keys: Collection[str]) -> dict[str, Any]:
    """A loaded task as document fields: what differs from the model's defaults, plus every
    field the DAG's ``defaults`` set (at whatever value), so that the API applying those
    defaults again cannot change the task."""
    full = task.model_dump(mode="json", exclude={"task_id"})
    out = task.model_dump(mode="json", exclude={"task_id"}, exclude_defaults=True)
    for key in default_keys:
        if key in full:
            out.setdefault(key, full[key])
    return out


def resolved_document(
    raw: Mapping[str, Any],
    dbt_tasks: Mapping[str, Mapping[str, Any]],
    resolution: DbtResolution,
) -> dict[str, Any]:
    """``raw`` (the document as written) with the dbt tasks in ``tasks`` and the record."""
    out = {key: value for key, value in raw.items() if key not in ("tasks", "dbt")}
    out["tasks"] = {**(raw.get("tasks") or {}), **{t: dict(v) for t, v in dbt_tasks.items()}}
    out["dbt"] = {**raw["dbt"], RESOLVED_KEY: resolution.model_dump(mode="json")}
    return out
