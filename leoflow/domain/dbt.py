"""dbt projects as DAGs: the ``dbt:`` section of a DAG file and the manifest -> task graph.

Pure: it reads a ``manifest.json`` already parsed into a dict and returns raw task
mappings; finding, building and caching the manifest is the adapter's job
(``leoflow/dbt/``). Leoflow never imports dbt (its protobuf pin conflicts with
ours), so everything here works on dbt's JSON artifacts, which also keeps it
independent of dbt's version.

What becomes a task:

- every selected model, seed and snapshot: ``dbt.<name>`` (``dbt.<package>.<name>``
  when two packages share a name; ``leoflow.domain.dbt_ids`` says which id exactly,
  and refuses two nodes in one task); ephemeral models are not run by dbt on their
  own, so they are no task and their children depend on what they depend on;
- with ``tests: after_model`` every test whose parents are all selected:
  ``dbt.test.<name>``, after its parents. A model's children also wait for the
  tests of that model that test it alone (as ``dbt build`` does), so a failing test
  blocks what is built on the data it rejected and nothing else; a test of two
  models (``relationships``) blocks nothing;
- with ``tests: after_all`` one task ``dbt.tests`` that tests the whole selection
  after every model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from leoflow.domain.dbt_assets import adapter_of, node_assets
from leoflow.domain.dbt_compact import compact_graph, compact_problem
from leoflow.domain.dbt_graph import Graph, SelectorError, select
from leoflow.domain.dbt_ids import TESTS_TASK, task_ids
from leoflow.domain.dbt_resolved import DbtResolution
from leoflow.domain.dbt_waves import plan_waves

RUNNABLE = ("model", "seed", "snapshot")
# What dbt calls to build each kind of node alone.
_VERB = {"model": "run", "seed": "seed", "snapshot": "snapshot", "test": "test"}
_SOURCE_KEY = re.compile(r"^source:[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")


class DbtSpec(BaseModel):
    """The ``dbt:`` section of a DAG file."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    project_dir: str
    profiles_dir: str | None = None
    target: str | None = None
    select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    tests: Literal["after_model", "after_all", "none"] = "after_model"
    depends_on: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    defaults: dict[str, Any] = Field(default_factory=dict)
    executable: str = "dbt"
    # wave: the models of one wave may share one dbt invocation (leoflow.domain.dbt_waves)
    batch: Literal["none", "wave"] = "none"
    # Set by the loader from the manifest (leoflow.domain.dbt_compact), whatever a file
    # says, or sent resolved by ``leoflow dags apply``: what a run's conf selection
    # (dbt_select) is evaluated on.
    graph: dict[str, Any] | None = None
    # The DAG file's folder inside the DAG image, for tasks run as pods
    # (leoflow/dbt/image.py); None: the same path as where the file is loaded.
    image_dir: str | None = None
    # Set by ``leoflow dags apply`` (leoflow/domain/dbt_resolved.py): the nodes are
    # already tasks of the document, and this says which manifest they came from.
    resolved: DbtResolution | None = None

    @field_validator("select", "exclude", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("depends_on")
    @classmethod
    def _source_keys(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for key in value:
            if not _SOURCE_KEY.match(key):
                raise ValueError(
                    f"key {key!r} must name a dbt source as source:<source_name>.<table_name>"
                )
        return value

    @field_validator("project_dir", "executable")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("graph")
    @classmethod
    def _graph_shape(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = None if value is None else compact_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("image_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"expected an absolute path inside the DAG image, got {value!r}")
        return value


Loc = tuple[str, ...]


@dataclass
class Expansion:
    """What ``expand`` made of a manifest: raw task mappings, and the problems found."""

    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[tuple[Loc, str]] = field(default_factory=list)
    # task id -> the dbt node it runs (the after_all tests task is in neither)
    uids: dict[str, str] = field(default_factory=dict)
    # with batch: wave, which tasks may share a dbt invocation (dbt_waves.plan_waves)
    waves: dict[str, Any] | None = None
    # the selection graph the DAG keeps (dbt_compact.compact_graph)
    graph: dict[str, Any] | None = None
    # The manifest expanded, for a caller that records where the tasks came from.
    manifest: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Paths:
    """Where the command runs dbt: absolute paths the adapter resolved."""

    project_dir: str
    profiles_dir: str | None
    # Per task, dbt writes target/ and logs/ below this: /tmp in a pod, so a
    # read-only root filesystem is no obstacle.
    scratch_dir: str = "/tmp/leoflow-dbt"
    # dbt's partial parse from the parse behind the manifest: a task's first run starts
    # from it instead of parsing the whole project (seconds per task).
    partial_parse: str | None = None


# ----------------------------------------------------------------------- expansion


def _select_arg(graph: Graph, uid: str) -> str:
    """A selector naming exactly this node: its package-qualified fqn."""
    node = graph.nodes[uid]
    if graph.resource_type(uid) == "test":
        return str(node.get("name"))
    fqn = node.get("fqn") or [node.get("package_name"), graph.name(uid)]
    return "fqn:" + ".".join(str(p) for p in fqn)


def dbt_command(spec: DbtSpec, paths: Paths, verb: str, selectors: list[str]) -> list[str]:
    argv = [spec.executable, verb, "--select", *selectors]
    argv += ["--project-dir", paths.project_dir]
    if paths.profiles_dir:
        argv += ["--profiles-dir", paths.profiles_dir]
    if spec.target:
        argv += ["--target", spec.target]
    return argv


def task_command(task_id: str, dbt_argv: list[str]) -> list[str]:
    """The task's command: Leoflow's small dbt wrapper around the dbt command.

    The wrapper (``leoflow dbt-task``, stdlib only) gives the run its own target and
    log directory under the scratch dir, then turns ``run_results.json`` into an
    exit reason naming the node and dbt's own error line.
    """
    return ["leoflow", "dbt-task", "--task", task_id, "--", *dbt_argv]


def task_env(dag_id: str, task_id: str, paths: Paths) -> dict[str, str]:
    base = f"{paths.scratch_dir}/{dag_id}/{task_id}"
    env = {
        "DBT_TARGET_PATH": f"{base}/target",
        "DBT_LOG_PATH": f"{base}/logs",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_USE_COLORS": "false",
    }
    if paths.profiles_dir:
        env["DBT_PROFILES_DIR"] = paths.profiles_dir
    if paths.partial_parse:
        env["LEOFLOW_DBT_PARTIAL_PARSE"] = paths.partial_parse
    return env


def _read_through_ephemeral(graph: Graph, uid: str, wanted: Callable[[str], bool]) -> set[str]:
    """The nodes ``uid`` reads for which ``wanted`` holds, looking through ephemeral models."""
    out: set[str] = set()
    stack = list(graph.parents[uid])
    seen: set[str] = set()
    while stack:
        up = stack.pop()
        if up in seen:
            continue
        seen.add(up)
        if wanted(up):
            out.add(up)
        elif _is_ephemeral(graph, up):
            stack.extend(graph.parents[up])
    return out


def _runnable_parents(graph: Graph, uid: str, selected: set[str]) -> set[str]:
    """Selected runnable nodes ``uid`` reads from, looking through ephemeral models."""
    return _read_through_ephemeral(graph, uid, selected.__contains__)


def _is_ephemeral(graph: Graph, uid: str) -> bool:
    node = graph.nodes[uid]
    return (
        graph.resource_type(uid) == "model"
        and (node.get("config") or {}).get("materialized") == "ephemeral"
    )


def _is_relation(graph: Graph, uid: str) -> bool:
    """A node a table or view stands for: a source, or a runnable node not ephemeral."""
    kind = graph.resource_type(uid)
    return kind == "source" or (kind in RUNNABLE and not _is_ephemeral(graph, uid))


def _sources_read(graph: Graph, uid: str) -> set[str]:
    """Sources ``uid`` reads, directly or through ephemeral models."""
    return _read_through_ephemeral(graph, uid, lambda up: graph.resource_type(up) == "source")


def expand(
    spec: DbtSpec,
    manifest: Mapping[str, Any],
    *,
    dag_id: str,
    paths: Paths,
    ordinary_tasks: Iterable[str] = (),
) -> Expansion:
    """The tasks a manifest becomes under ``spec``; problems name their field path."""
    out = Expansion(manifest=manifest)
    graph = Graph(manifest)
    ordinary = set(ordinary_tasks)
    runnable_all = {
        uid
        for uid in graph.nodes
        if graph.resource_type(uid) in RUNNABLE and not _is_ephemeral(graph, uid)
    }
    tests_all = {uid for uid in graph.nodes if graph.resource_type(uid) == "test"}
    where: Loc = ("dbt", "select")
    try:
        chosen = select(graph, spec.select) if spec.select else runnable_all | tests_all
        where = ("dbt", "exclude")
        excluded = select(graph, spec.exclude)
    except SelectorError as exc:
        out.problems.append((where, str(exc)))
        return out
    selected = (chosen & runnable_all) - excluded
    tests: set[str] = set()
    if spec.tests != "none":
        for uid in tests_all - excluded:
            ups = [u for u in graph.parents[uid] if graph.resource_type(u) != "source"]
            if uid in chosen or (ups and all(u in selected for u in ups)):
                tests.add(uid)
    if not selected and not tests:
        what = " ".join(spec.select) or "the whole project"
        out.problems.append(
            (
                ("dbt", "select"),
                f"selects no model, seed or snapshot in dbt project {graph.project!r} "
                f"(select: {what!r}"
                + (f", exclude: {' '.join(spec.exclude)!r}" if spec.exclude else "")
                + ")",
            )
        )
        return out

    # Sources an ordinary task feeds.
    sources_by_key: dict[str, str] = {}
    for uid in graph.nodes:
        if graph.resource_type(uid) == "source":
            sources_by_key[f"source:{graph.name(uid)}"] = uid
    feeds: dict[str, tuple[str, ...]] = {}
    for key, upstreams in spec.depends_on.items():
        source_uid = sources_by_key.get(key)
        if source_uid is None:
            known = ", ".join(sorted(sources_by_key)) or "none"
            out.problems.append(
                (
                    ("dbt", "depends_on", key),
                    f"no such source in the dbt project (sources: {known})",
                )
            )
            continue
        for index, upstream in enumerate(upstreams):
            if upstream not in ordinary:
                out.problems.append(
                    (
                        ("dbt", "depends_on", key, str(index)),
                        f"unknown task {upstream!r}: depends_on lists the DAG's own tasks "
                        f"that feed this source",
                    )
                )
        feeds[source_uid] = upstreams
    if out.problems:
        return out

    ids, clashes = task_ids(graph, selected | (tests if spec.tests == "after_model" else set()))
    out.problems.extend(clashes)
    for uid, task_id in ids.items():
        if task_id in ordinary:
            out.problems.append(
                (
                    ("tasks", task_id),
                    f"task id {task_id!r} is also the task of dbt node {uid!r}; rename the task",
                )
            )
    if out.problems:
        return out

    parents_of = {uid: _runnable_parents(graph, uid, selected) for uid in selected | tests}
    # Tests of one model gate that model's children.
    gates: dict[str, list[str]] = {}
    if spec.tests == "after_model":
        for uid in tests:
            tested = parents_of[uid]
            real = [u for u in graph.parents[uid] if graph.resource_type(u) != "source"]
            if len(tested) == 1 and len(real) == 1:
                gates.setdefault(next(iter(tested)), []).append(uid)

    selectors_of: dict[str, list[str]] = {}
    adapter = adapter_of(manifest)

    def add(task_id: str, verb: str, selectors: list[str], deps: set[str]) -> None:
        selectors_of[task_id] = selectors
        out.tasks[task_id] = {
            "command": task_command(task_id, dbt_command(spec, paths, verb, selectors)),
            "env": task_env(dag_id, task_id, paths),
            "depends_on": sorted(deps),
        }

    for uid in sorted(selected):
        deps: set[str] = set()
        for up in parents_of[uid]:
            deps.add(ids[up])
            deps.update(ids[t] for t in gates.get(up, ()))
        for source in _sources_read(graph, uid):
            deps.update(feeds.get(source, ()))
        add(ids[uid], _VERB[graph.resource_type(uid)], [_select_arg(graph, uid)], deps)
        reads = _read_through_ephemeral(graph, uid, lambda up: _is_relation(graph, up))
        out.tasks[ids[uid]].update(node_assets(graph, adapter, uid, reads))
    if spec.tests == "after_model":
        for uid in sorted(tests):
            deps = {ids[up] for up in parents_of[uid]}
            for source in _sources_read(graph, uid):
                deps.update(feeds.get(source, ()))
            add(ids[uid], "test", [_select_arg(graph, uid)], deps)
    elif spec.tests == "after_all" and tests:
        if TESTS_TASK in ordinary:
            out.problems.append((("tasks", TESTS_TASK), "is the dbt tests task; rename the task"))
            return out
        selectors = sorted(_select_arg(graph, uid) for uid in tests)
        add(TESTS_TASK, "test", selectors, {ids[uid] for uid in selected})
    out.uids = {task_id: uid for uid, task_id in ids.items()}
    out.graph = compact_graph(graph, out.uids)
    if spec.batch == "wave":
        out.waves = plan_waves(out.tasks, out.uids, selectors_of, frozenset({TESTS_TASK}))
    return out
