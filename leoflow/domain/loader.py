"""Load ``leoflow.yaml`` files into DagSpecs, with errors a DAG author can act on.

Every problem names the file, the line where YAML lets us know it, the field
path and what was expected. A folder load never stops at a bad file: it returns
the good DAGs and the errors side by side, so one broken file cannot take the
others down.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from leoflow.domain.dag import DEFAULT_POOL, DagSpec, TaskFields
from leoflow.domain.dbt_section import DbtExpander, section_tasks

DAG_FILE_SUFFIXES = (".yaml", ".yml")
PASSTHROUGH_SETTING = "taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH)"


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    line: int | None = None

    def render(self, path: Path | str) -> str:
        where = f"{path}:{self.line}" if self.line else str(path)
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class DagFileError(Exception):
    """A DAG file that cannot be used; ``problems`` lists every reason found."""

    def __init__(self, path: Path, problems: Iterable[Problem]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__("\n".join(p.render(path) for p in self.problems))


@dataclass(frozen=True)
class LoadOptions:
    """What the environment knows: pools that exist and the operator's pod passthrough.

    ``known_pools`` None means pools are not checked; ``passthrough`` None means
    execution fields are not checked (Lite ignores them altogether).
    """

    known_pools: Collection[str] | None = None
    passthrough: Collection[str] | None = None
    # Reads a ``dbt:`` section's project (leoflow.dbt.project.expander); None refuses one.
    dbt: DbtExpander | None = None


@dataclass(frozen=True)
class LoadedDag:
    spec: DagSpec
    path: Path
    source: str


@dataclass
class FolderLoad:
    dags: dict[str, LoadedDag] = field(default_factory=dict)
    errors: list[DagFileError] = field(default_factory=list)


def _line_map(node: yaml.Node, path: tuple[str, ...], out: dict[tuple[str, ...], int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            out[(*path, key)] = key_node.start_mark.line + 1
            _line_map(value_node, (*path, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _line_map(item, (*path, str(index)), out)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _pydantic_problem(err: Any, prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str]:
    loc = prefix + tuple(str(p) for p in err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        return loc, "unknown field"
    if kind == "missing":
        return loc, "required field is missing"
    message = str(err["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind not in {"value_error", "assertion_error"} and "input" in err:
        message = f"{message[0].lower()}{message[1:]}, got {_describe(err['input'])}"
    return loc, message


# libyaml's composer when PyYAML was built with it: ~15x faster on a 200-task file.
_Composer: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(text: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """The document and the line of every field path, from one parse."""
    node = yaml.compose(text, Loader=_Composer)
    lines: dict[tuple[str, ...], int] = {}
    if node is None:
        return None, lines
    _line_map(node, (), lines)
    return yaml.SafeLoader("").construct_document(node), lines


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for upstream in graph.get(node, ()):
            if state.get(upstream) == 1:
                return [*stack[stack.index(upstream) :], upstream]
            if upstream not in state and (found := visit(upstream)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _semantic_problems(spec: DagSpec, options: LoadOptions) -> list[tuple[tuple[str, ...], str]]:
    problems: list[tuple[tuple[str, ...], str]] = []
    known = sorted(spec.tasks)
    for task_id, task in spec.tasks.items():
        for index, upstream in enumerate(task.depends_on):
            if upstream == task_id:
                problems.append(
                    (("tasks", task_id, "depends_on", str(index)), "a task cannot depend on itself")
                )
            elif upstream not in spec.tasks:
                problems.append(
                    (
                        ("tasks", task_id, "depends_on", str(index)),
                        f"unknown task {upstream!r} (tasks in this DAG: {', '.join(known)})",
                    )
                )
        known_pools = options.known_pools
        if known_pools is not None and task.pool not in {DEFAULT_POOL, *known_pools}:
            pools = ", ".join(sorted({DEFAULT_POOL, *known_pools}))
            problems.append(
                (("tasks", task_id, "pool"), f"unknown pool {task.pool!r} (pools: {pools})")
            )
        if options.passthrough is not None:
            allowed = set(options.passthrough)
            for name in task.execution.declared():
                if name not in allowed:
                    problems.append(
                        (
                            ("tasks", task_id, "execution", name),
                            f"task {task_id!r} sets execution.{name}, which the operator has not "
                            f"allowed; add '{name}' to {PASSTHROUGH_SETTING} to allow it",
                        )
                    )
            for side in ("requests", "limits"):
                amounts = getattr(task.resources, side)
                if amounts.ephemeral_storage is not None and "ephemeral_storage" not in allowed:
                    problems.append(
                        (
                            ("tasks", task_id, "resources", side, "ephemeral_storage"),
                            f"task {task_id!r} sets resources.{side}.ephemeral_storage, which the "
                            f"operator has not allowed; add 'ephemeral_storage' to "
                            f"{PASSTHROUGH_SETTING} to allow it",
                        )
                    )
    if not any(p[0][2:3] == ("depends_on",) for p in problems):
        cycle = _find_cycle({t: s.depends_on for t, s in spec.tasks.items()})
        if cycle:
            problems.append(
                (
                    ("tasks", cycle[0], "depends_on"),
                    "dependency cycle: "
                    + " -> ".join(reversed(cycle))
                    + " (each task would have to run before the next)",
                )
            )
    return problems


def parse_dag(text: str, path: Path, options: LoadOptions = LoadOptions()) -> DagSpec:
    """Validate one DAG document; raise DagFileError listing every problem found."""
    try:
        raw, lines = _parse(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reason = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise DagFileError(path, [Problem("", f"invalid YAML: {reason}", line)]) from exc

    def problem(loc: tuple[str, ...], message: str) -> Problem:
        line = None
        for cut in range(len(loc), -1, -1):
            if loc[:cut] in lines:
                line = lines[loc[:cut]]
                break
        return Problem(".".join(loc), message, line)

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
                problem(*_pydantic_problem(e, ("defaults",))) for e in exc.errors()
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
    dbt_tasks: dict[str, dict[str, Any]] = {}
    if not problems and "dbt" in raw and isinstance(tasks_raw, dict):
        section = section_tasks(raw, path, tasks_raw, defaults_raw, options.dbt)
        problems.extend(problem(*_pydantic_problem(err)) for err in section.problems)
        dbt_tasks = section.tasks
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
    try:
        spec = DagSpec.model_validate(merged)
    except ValidationError as exc:
        seen: set[tuple[str, str]] = {(p.field, p.message) for p in problems}
        for err in exc.errors():
            loc, message = _pydantic_problem(err)
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
        raise DagFileError(path, problems) from exc
    if problems:
        raise DagFileError(path, problems)

    semantic = _semantic_problems(spec, options)
    if semantic:
        raise DagFileError(path, [problem(loc, message) for loc, message in semantic])
    return spec


def load_dag_file(path: Path, options: LoadOptions = LoadOptions()) -> LoadedDag:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DagFileError(path, [Problem("", f"cannot read file: {exc}")]) from exc
    return LoadedDag(spec=parse_dag(text, path, options), path=path, source=text)


def dag_files(folder: Path) -> list[Path]:
    if folder.is_file():
        return [folder]
    # A dbt project beside its DAG file is full of YAML that is dbt's, not DAGs.
    projects = {p.parent for p in folder.rglob("dbt_project.yml")}
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix in DAG_FILE_SUFFIXES
        and p.is_file()
        and not any(parent in projects for parent in p.parents)
    )


def load_dag_folder(folder: Path, options: LoadOptions = LoadOptions()) -> FolderLoad:
    """Load every DAG file below ``folder``; bad files land in ``errors``, not in the way."""
    result = FolderLoad()
    if not folder.exists():
        result.errors.append(DagFileError(folder, [Problem("", "no such file or directory")]))
        return result
    for path in dag_files(folder):
        try:
            loaded = load_dag_file(path, options)
        except DagFileError as exc:
            result.errors.append(exc)
            continue
        dag_id = loaded.spec.dag_id
        if dag_id in result.dags:
            first = result.dags[dag_id].path
            message = f"duplicate dag_id {dag_id!r}: already defined in {first}"
            line = _parse(loaded.source)[1].get(("dag_id",))
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
    return sorted(found)
