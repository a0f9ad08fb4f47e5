"""``leoflow dags apply`` of a DAG file with a ``dbt:`` section: resolved here, on the client.

The API has no project on disk, so the client reads it (``leoflow.dbt.project``,
exactly as ``leoflow lite`` and ``leoflow run`` do, manifest cache included), loads
the whole file with the Lite loader (every problem named by file, line and field
before anything is sent), and sends a document whose dbt nodes are tasks already
plus a ``dbt.resolved`` record (leoflow/domain/dbt_resolved.py). The API validates
that like any DAG document and stores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from leoflow.commands.common import to_stderr
from leoflow.dagfile.loader import LoadOptions, parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.dagfile.yamldoc import YamlDocError, read_document
from leoflow.dbt.project import expander
from leoflow.domain.dbt import Expansion
from leoflow.domain.dbt_resolved import (
    RESOLVED_KEY,
    DbtResolution,
    manifest_sha256,
    resolved_document,
    task_mapping,
)
from leoflow.domain.dbt_section import DbtRequest


@dataclass(frozen=True)
class Resolved:
    text: str  # the document to send
    resolution: DbtResolution | None  # None: the file had no section to resolve


def _needs_resolving(raw: object) -> bool:
    if not isinstance(raw, dict) or not isinstance(raw.get("dbt"), dict):
        return False
    return RESOLVED_KEY not in raw["dbt"]


def resolve(path: Path, text: str, cache_dir: Path) -> Resolved:
    """``text`` with its dbt section resolved against the project beside ``path``.

    A file without a ``dbt:`` section (or one resolved already) goes as it is: the API
    reports its problems. Raises DagFileError (file, line, field) when the project or
    the rest of the file cannot be used.
    """
    try:
        raw = read_document(text).value
    except YamlDocError:
        return Resolved(text, None)  # the API names the line, like for any file
    if not _needs_resolving(raw):
        return Resolved(text, None)
    expand = expander(cache_dir, in_pods=True, progress=to_stderr)  # Pro: every task a pod
    seen: list[tuple[DbtRequest, Expansion]] = []

    def capture(request: DbtRequest) -> Expansion:
        expansion = expand(request)
        seen.append((request, expansion))
        return expansion

    spec = parse_dag(text, path, LoadOptions(dbt=capture))
    request, expansion = seen[-1]
    assert expansion.manifest is not None  # parse_dag raised if the expansion failed
    written = raw.get("tasks") or {}
    dbt_ids = sorted(t for t in spec.tasks if t not in written)
    project_dir = _project_dir_of(expansion)
    resolution = DbtResolution(
        manifest_sha256=manifest_sha256(expansion.manifest),
        project=str((expansion.manifest.get("metadata") or {}).get("project_name") or ""),
        project_dir=project_dir or request.spec.project_dir,
        tasks=tuple(dbt_ids),
    )
    default_keys = list(raw.get("defaults") or {})
    tasks = {t: task_mapping(spec.tasks[t], default_keys) for t in dbt_ids}
    document = resolved_document(raw, tasks, resolution)
    if spec.dbt is not None and spec.dbt.graph is not None:
        # What a run's conf selection (dbt_select) is evaluated on: the API has no
        # project to read it from.
        document["dbt"]["graph"] = spec.dbt.graph
    return Resolved(_dump(document), resolution)


def _project_dir_of(expansion: Expansion) -> str | None:
    """The ``--project-dir`` the tasks' commands name (the same for every dbt task)."""
    for task in expansion.tasks.values():
        argv = task.get("command") or []
        if "--project-dir" in argv:
            index = argv.index("--project-dir")
            if index + 1 < len(argv):
                return str(argv[index + 1])
    return None


class _PlainDumper(yaml.SafeDumper):
    """No anchors: a value the file shared through a merge key is written out each time."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _dump(document: Mapping[str, Any]) -> str:
    # Leaf lists and mappings in flow style keep a 1,000-model DAG well under the API's
    # body limit (api_dag_body_limit); the reader is the same bounded YAML reader.
    return yaml.dump(
        dict(document),
        Dumper=_PlainDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=None,
        width=1000,
    )


__all__ = ["DagFileError", "Resolved", "resolve"]
