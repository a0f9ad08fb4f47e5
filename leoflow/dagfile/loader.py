"""Load ``leoflow.yaml`` files into DagSpecs, with errors a DAG author can act on.

Every problem names the file, the line where YAML lets us know it, the field
path and what was expected. A folder load never stops at a bad file: it returns
the good DAGs and the errors side by side, so one broken file cannot take the
others down.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from leoflow.dagfile.dag_checks import pool_problems, semantic_problems
from leoflow.dagfile.file_text import read_dag_text
from leoflow.dagfile.hints import schedule_problems, unknown_upstreams
from leoflow.dagfile.notify_secrets import missing_webhook_secrets
from leoflow.dagfile.problems import DagFileError, DagFileGone, Problem, located, pydantic_problem
from leoflow.dagfile.walk import list_folder
from leoflow.dagfile.yamldoc import YamlDocError, read_document
from leoflow.domain.dag import DagSpec, TaskFields
from leoflow.domain.dbt_section import DbtExpander, section_tasks
from leoflow.domain.mapping import map_problems


@dataclass(frozen=True)
class LoadOptions:
    """What the environment knows: pools that exist and the operator's pod passthrough.

    ``known_pools`` None means pools are not checked; ``passthrough`` None means
    execution fields are not checked (Lite ignores them altogether).
    """

    known_pools: Collection[str] | None = None
    # The slots of the pools known here: a task needing more than its pool has would
    # wait for ever, so it is said at load (None or a pool not in it: not checked).
    pool_sizes: Mapping[str, int] | None = None
    passthrough: Collection[str] | None = None
    # Reads a ``dbt:`` section's project (leoflow.dbt.project.expander); None refuses one.
    dbt: DbtExpander | None = None
    # The secret names a ``notify:`` webhook may use, and where they live (for the
    # error); None: not checked (the secrets are where this process cannot see them).
    known_secrets: Collection[str] | None = None
    secrets_where: str = "the secrets backend"


def load_options(
    executor: str,
    task_pod_passthrough: Collection[str],
    *,
    known_pools: Collection[str] | None = None,
    pool_sizes: Mapping[str, int] | None = None,
    dbt: DbtExpander | None = None,
    known_secrets: Collection[str] | None = None,
    secrets_where: str = "the secrets backend",
) -> LoadOptions:
    """The one rule for the options a DAG is loaded with, for every way in (a folder,
    ``leoflow run``, the API): ``passthrough`` (which pod fields a task may set)
    applies only where tasks run as pods, i.e. with the kubernetes executor."""
    return LoadOptions(
        known_pools=known_pools,
        pool_sizes=pool_sizes,
        passthrough=task_pod_passthrough if executor == "kubernetes" else None,
        dbt=dbt,
        known_secrets=known_secrets,
        secrets_where=secrets_where,
    )


@dataclass(frozen=True)
class LoadedDag:
    spec: DagSpec
    path: Path
    source: str


@dataclass
class FolderLoad:
    dags: dict[str, LoadedDag] = field(default_factory=dict)
    errors: list[DagFileError] = field(default_factory=list)


def check_pools(loaded: LoadedDag, known_pools: Collection[str]) -> None:
    """Raise DagFileError, with file, line and field, for each task whose pool is unknown."""
    found = pool_problems(loaded.spec, known_pools)
    if found:
        lines = read_document(loaded.source).lines
        raise DagFileError(loaded.path, [located(lines, loc, msg) for loc, msg in found])


def parse_dag(text: str, path: Path, options: LoadOptions = LoadOptions()) -> DagSpec:
    """Validate one DAG document; raise DagFileError listing every problem found."""
    try:
        document = read_document(text)
    except YamlDocError as exc:
        raise DagFileError(path, [Problem(".".join(exc.path), exc.message, exc.line)]) from exc
    # A key set twice is one problem among the file's others, not the end of the check.
    twice = [Problem(".".join(d.path), d.message, d.line) for d in document.duplicates]
    try:
        spec = _validate(document.value, document.lines, path, options)
    except DagFileError as exc:
        raise DagFileError(path, [*twice, *exc.problems]) from exc
    if twice:
        raise DagFileError(path, twice)
    return spec


def _validate(
    raw: Any, lines: dict[tuple[str, ...], int], path: Path, options: LoadOptions
) -> DagSpec:
    def problem(loc: tuple[str, ...], message: str) -> Problem:
        return located(lines, loc, message)

    if not isinstance(raw, dict):
        raise DagFileError(path, [Problem("", "expected a mapping with dag_id and tasks", 1)])

    problems: list[Problem] = []
    defaults_problems: list[Problem] = []
    defaults_raw = raw.get("defaults") or {}
    tasks_raw = raw.get("tasks")
    if not isinstance(defaults_raw, dict):
        problems.append(problem(("defaults",), "expected a mapping of task fields"))
        defaults_raw = {}
    else:
        try:
            TaskFields.model_validate(defaults_raw)
        except ValidationError as exc:
            defaults_problems.extend(
                problem(*pydantic_problem(e, ("defaults",))) for e in exc.errors()
            )
    if "dbt" in raw and tasks_raw is None:
        tasks_raw = {}  # a DAG may be its dbt project alone
    elif tasks_raw is None:
        problems.append(problem(("tasks",), "required field is missing"))
    elif not isinstance(tasks_raw, dict) or not (tasks_raw or "dbt" in raw):
        problems.append(problem(("tasks",), "expected a non-empty mapping of task id to task"))
    elif bad := [k for k, v in tasks_raw.items() if not isinstance(v, dict)]:
        problems.extend(
            problem(("tasks", str(k)), "expected a mapping of task fields") for k in bad
        )
    problems += [problem(loc, message) for loc, message in schedule_problems(raw)]
    dbt_tasks: dict[str, dict[str, Any]] = {}
    dbt_graph: dict[str, Any] | None = None
    if not problems and "dbt" in raw and isinstance(tasks_raw, dict):
        section = section_tasks(raw, str(path), tasks_raw, defaults_raw, options.dbt)
        problems.extend(problem(*pydantic_problem(err)) for err in section.problems)
        dbt_tasks, dbt_graph = section.tasks, section.graph
    if problems:
        raise DagFileError(path, [*defaults_problems, *problems])

    assert isinstance(tasks_raw, dict)
    problems = list(defaults_problems)
    merged = {key: value for key, value in raw.items() if key != "defaults"}
    merged["tasks"] = {
        str(task_id): {**defaults_raw, **task, "task_id": str(task_id)}
        for task_id, task in tasks_raw.items()
    }
    for task_id, task in dbt_tasks.items():
        merged["tasks"][task_id] = {**task, "task_id": task_id}
    if dbt_graph is not None:  # for a run's conf selection (leoflow.domain.dbt_run_select)
        merged["dbt"] = {**raw["dbt"], "graph": dbt_graph}
    try:
        spec = DagSpec.model_validate(merged)
    except ValidationError as exc:
        seen: set[tuple[str, str]] = {(p.field, p.message) for p in problems}
        for err in exc.errors():
            loc, message = pydantic_problem(err)
            if loc[:1] == ("tasks",) and len(loc) >= 3:
                task_id, field_name = loc[1], loc[2]
                if field_name == "task_id":
                    loc = ("tasks", task_id)
                    message = "task id must match [A-Za-z0-9_][A-Za-z0-9_.-]*"
                elif field_name not in tasks_raw.get(task_id, {}) and field_name in defaults_raw:
                    loc = ("defaults", *loc[2:])
                elif field_name == "command" and err["type"] == "missing":
                    message = "required field is missing (set it on the task or in defaults)"
            key = (".".join(loc), message)
            if key not in seen:
                seen.add(key)
                problems.append(problem(loc, message))
        problems += [problem(*p) for p in unknown_upstreams(tasks_raw, dbt_tasks)]
        raise DagFileError(path, problems) from exc
    if problems:
        raise DagFileError(path, problems)

    semantic = semantic_problems(
        spec,
        known_pools=options.known_pools,
        pool_sizes=options.pool_sizes,
        passthrough=options.passthrough,
    )
    semantic += map_problems(spec, dbt_tasks)
    if options.known_secrets is not None:
        semantic += missing_webhook_secrets(spec, raw, options.known_secrets, options.secrets_where)
    if semantic:
        raise DagFileError(path, [problem(loc, message) for loc, message in semantic])
    return spec


def load_dag_file(path: Path, options: LoadOptions = LoadOptions()) -> LoadedDag:
    text = read_dag_text(path)
    return LoadedDag(spec=parse_dag(text, path, options), path=path, source=text)


def _load_one(path: Path, options: LoadOptions) -> LoadedDag:
    """Like load_dag_file, but a bug in the loader becomes this file's error, not a crash."""
    try:
        return load_dag_file(path, options)
    except DagFileError:
        raise
    except Exception as exc:  # one file must never take the folder down
        message = (
            f"internal error while loading this file ({type(exc).__name__}: {exc}); "
            "the other DAGs are not affected; please report this with the file"
        )
        raise DagFileError(path, [Problem("", message)]) from exc


def dag_files(folder: Path) -> list[Path]:
    # A dbt project beside its DAG file is full of YAML that is dbt's, not DAGs.
    return list_folder(folder).dag_files()


def load_dag_folder(folder: Path, options: LoadOptions = LoadOptions()) -> FolderLoad:
    """Load every DAG file below ``folder``; bad files land in ``errors``, not in the way.

    Files that vanish while it reads are skipped; entries named like DAG files that are
    not regular files (``leoflow.dagfile.walk``) are errors, never opened."""
    result = FolderLoad()
    if not folder.exists():
        result.errors.append(DagFileError(folder, [Problem("", "no such file or directory")]))
        return result
    listing = list_folder(folder)
    for path, why in sorted(listing.refused_files().items()):
        result.errors.append(DagFileError(path, [Problem("", why)]))
    for path in listing.dag_files():
        try:
            loaded = _load_one(path, options)
        except DagFileGone:
            continue
        except DagFileError as exc:
            result.errors.append(exc)
            continue
        dag_id = loaded.spec.dag_id
        if dag_id in result.dags:
            first = result.dags[dag_id].path
            message = f"duplicate dag_id {dag_id!r}: already defined in {first}"
            line = read_document(loaded.source).lines.get(("dag_id",))
            result.errors.append(DagFileError(path, [Problem("dag_id", message, line)]))
            continue
        result.dags[dag_id] = loaded
    return result


def lite_ignored_fields(spec: DagSpec) -> list[str]:
    """Fields Lite does not apply (image, resources, execution), for one notice per DAG."""
    found: set[str] = set()
    for task in spec.tasks.values():
        if task.image:
            found.add("image")
        if task.resources.requests != type(task.resources.requests)() or (
            task.resources.limits != type(task.resources.limits)()
        ):
            found.add("resources")
        if task.execution.declared():
            found.add("execution")
    if spec.kubernetes is not None and spec.kubernetes.reuse_pods is not None:
        found.add("kubernetes.reuse_pods")  # Lite runs every task in one warm agent anyway
    return sorted(found)
