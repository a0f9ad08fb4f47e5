"""The ``dbt:`` section of a DAG file -> raw task mappings the loader validates like any task.

The loader hands the section to an expander the caller wires in (``LoadOptions.dbt``):
reading the project and its manifest is I/O, so it lives in ``leoflow/dbt/``, not here.
A loader without one (a DAG uploaded through the API has no project beside it) says so,
unless ``leoflow dags apply`` resolved the section already (``dbt.resolved``): then its
tasks are in the document and nothing is expanded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from leoflow.domain.dag import TaskFields
from leoflow.domain.dbt import DbtSpec, Expansion
from leoflow.domain.dbt_resolved import resolution_problems

Loc = tuple[str, ...]


@dataclass(frozen=True)
class DbtRequest:
    """What an expander needs: the section, the file it is in, and the DAG around it."""

    spec: DbtSpec
    dag_file: str  # as the loader was given it; the expander resolves it on disk
    dag_id: str
    ordinary_tasks: frozenset[str]
    # What the dbt tasks' env and secrets will be (DAG defaults, then dbt.defaults):
    # ``dbt parse`` renders profiles.yml with the same env_var() calls.
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()


DbtExpander = Callable[[DbtRequest], Expansion]


@dataclass
class SectionTasks:
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the DAG keeps as dbt.graph (the loader sets it): None leaves the section as is.
    graph: dict[str, Any] | None = None
    # pydantic-shaped errors (loc, msg, type[, input]): the loader words them like its own
    problems: list[dict[str, Any]] = field(default_factory=list)


def _errors(exc: ValidationError, prefix: Loc) -> list[dict[str, Any]]:
    return [{**e, "loc": prefix + tuple(str(p) for p in e["loc"])} for e in exc.errors()]


def _problem(loc: Loc, message: str) -> dict[str, Any]:
    return {"loc": loc, "msg": message, "type": "value_error"}


def section_tasks(
    raw: Mapping[str, Any],
    path: str,
    ordinary: Mapping[str, Any],
    dag_defaults: Mapping[str, Any],
    expander: DbtExpander | None,
) -> SectionTasks:
    """The tasks the ``dbt`` section of ``raw`` adds, with DAG and dbt defaults applied."""
    out = SectionTasks()
    section = raw.get("dbt")
    if not isinstance(section, dict):
        out.problems.append(_problem(("dbt",), "expected a mapping with at least project_dir"))
        return out
    try:
        spec = DbtSpec.model_validate(section)
    except ValidationError as exc:
        out.problems.extend(_errors(exc, ("dbt",)))
        return out
    try:
        TaskFields.model_validate(spec.defaults)
    except ValidationError as exc:
        out.problems.extend(_errors(exc, ("dbt", "defaults")))
        return out
    if spec.resolved is not None:  # its tasks are in the document already
        out.problems.extend(
            _problem(loc, message) for loc, message in resolution_problems(spec.resolved, ordinary)
        )
        return out
    if expander is None:
        out.problems.append(
            _problem(
                ("dbt",),
                "a dbt section needs its project on disk, which the API does not have: "
                "send the DAG file with `leoflow dags apply FILE`, which reads the project "
                "beside it and sends the tasks its dbt nodes become (dbt.resolved)",
            )
        )
        return out
    user = spec.defaults
    rule = user.get("trigger_rule") or dag_defaults.get("trigger_rule") or "all_success"
    if spec.batch == "wave" and rule != "all_success":
        # A wave's leader runs its peers on the proof that its own upstreams succeeded.
        out.problems.append(
            _problem(
                ("dbt", "batch"),
                f"batch: wave needs the dbt tasks' trigger_rule all_success, not {rule!r}",
            )
        )
        return out
    env = {**(dag_defaults.get("env") or {}), **(user.get("env") or {})}
    request = DbtRequest(
        spec=spec,
        dag_file=path,
        dag_id=str(raw.get("dag_id") or ""),
        ordinary_tasks=frozenset(str(t) for t in ordinary),
        env={str(k): str(v) for k, v in env.items()},
        secrets=tuple(str(s) for s in (user.get("secrets") or dag_defaults.get("secrets") or ())),
    )
    expansion = expander(request)
    out.problems.extend(_problem(loc, message) for loc, message in expansion.problems)
    if out.problems:
        return out
    out.graph = expansion.graph
    for task_id, generated in expansion.tasks.items():
        task: dict[str, Any] = {**dag_defaults, **user, **generated}
        task["env"] = {
            **generated["env"],
            **(dag_defaults.get("env") or {}),
            **(user.get("env") or {}),
        }
        task["depends_on"] = sorted({*generated["depends_on"], *(user.get("depends_on") or ())})
        out.tasks[task_id] = task
    return out
