"""The loader's errors: every one names the file, the line and the field path."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from leoflow.dagfile.dag_checks import PASSTHROUGH_SETTING
from leoflow.dagfile.loader import (
    LoadOptions,
    dag_files,
    lite_ignored_fields,
    load_dag_file,
    load_dag_folder,
    parse_dag,
)
from leoflow.dagfile.problems import DagFileError, Problem
from leoflow.domain.dag import DEFAULT_POOL

PATH = Path("dags/sales/leoflow.yaml")


def errors(text: str, options: LoadOptions | None = None) -> DagFileError:
    with pytest.raises(DagFileError) as info:
        parse_dag(dedent(text).lstrip("\n"), PATH, options or LoadOptions())
    assert info.value.path == PATH
    return info.value


def only(err: DagFileError) -> Problem:
    assert len(err.problems) == 1, str(err)
    return err.problems[0]


def assert_problem(err: DagFileError, field: str, line: int, *fragments: str) -> None:
    """Exactly one problem at ``field``, on ``line``, rendered with path:line: field: ..."""
    matching = [p for p in err.problems if p.field == field]
    assert len(matching) == 1, str(err)
    problem = matching[0]
    assert problem.line == line, str(err)
    rendered = problem.render(PATH)
    assert rendered.startswith(f"{PATH}:{line}: {field}: "), rendered
    assert rendered in str(err)
    for fragment in fragments:
        assert fragment in problem.message, problem.message


GOOD = """
dag_id: nightly_sales
schedule: "0 3 * * *"
timezone: Europe/Berlin
max_active_runs: 1
max_active_tasks: 8
defaults:
  image: registry.example.com/etl:1.4
  retries: 2
  retry_delay: 30s
tasks:
  extract:
    command: ["python", "-m", "etl.extract"]
    env: {TARGET: prod, WORKERS: 4, DEBUG: false}
    secrets: [warehouse_password]
    resources:
      requests: {cpu: 500m, memory: 1Gi}
      limits: {memory: 2Gi, ephemeral_storage: 5Gi}
  transform:
    depends_on: [extract]
    command: dbt run --select sales
    pool: warehouse
    pool_slots: 1
    priority: 10
    retries: 0
    timeout: 30m
    execution:
      node_selector: {workload: leoflow}
      tolerations: [{key: workload, operator: Equal, value: leoflow, effect: NoSchedule}]
      priority_class_name: batch-low
"""


# --- the good file


def test_design_example_loads() -> None:
    spec = parse_dag(dedent(GOOD), PATH)
    assert spec.dag_id == "nightly_sales"
    assert spec.max_active_tasks == 8
    assert list(spec.tasks) == ["extract", "transform"]
    extract, transform = spec.tasks["extract"], spec.tasks["transform"]
    assert extract.task_id == "extract"
    assert extract.argv() == ["python", "-m", "etl.extract"]
    assert transform.argv() == ["/bin/sh", "-c", "dbt run --select sales"]
    assert extract.env == {"TARGET": "prod", "WORKERS": "4", "DEBUG": "false"}
    assert transform.depends_on == ("extract",)
    assert transform.timeout == 1800.0
    assert extract.resources.limits.ephemeral_storage == "5Gi"
    assert transform.execution.priority_class_name == "batch-low"
    assert transform.pool == "warehouse"
    assert extract.pool == DEFAULT_POOL


def test_defaults_apply_where_the_task_is_silent_and_yield_where_it_speaks() -> None:
    spec = parse_dag(dedent(GOOD), PATH)
    extract, transform = spec.tasks["extract"], spec.tasks["transform"]
    assert extract.retries == 2  # from defaults
    assert transform.retries == 0  # the task's own, although 0 is falsy
    assert extract.retry_delay == transform.retry_delay == 30.0
    assert extract.image == transform.image == "registry.example.com/etl:1.4"


def test_command_from_defaults() -> None:
    spec = parse_dag(
        "dag_id: d\ndefaults: {command: 'true'}\ntasks: {a: {}, b: {command: x}}\n", PATH
    )
    assert spec.tasks["a"].command == "true"
    assert spec.tasks["b"].command == "x"


# --- YAML and shape


def test_malformed_yaml_names_the_line() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: [unclosed
          b: {}
        """
    )
    problem = only(err)
    assert problem.message.startswith("invalid YAML: ")
    assert problem.line == 5
    assert str(err).startswith(f"{PATH}:5: invalid YAML: ")


def test_tab_indentation_is_malformed_yaml() -> None:
    problem = only(errors("dag_id: d\ntasks:\n\ta: {command: x}\n"))
    assert problem.message.startswith("invalid YAML")
    assert problem.line == 3


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n", "42\n"])
def test_document_must_be_a_mapping(text: str) -> None:
    problem = only(errors(text))
    assert problem.message == "expected a mapping with dag_id and tasks"
    assert str(errors(text)) == f"{PATH}:1: expected a mapping with dag_id and tasks"


def test_missing_dag_id_and_tasks() -> None:
    err = errors("description: nothing\n")
    assert_problem(err, "tasks", 1, "required field is missing")


def test_missing_dag_id() -> None:
    err = errors("tasks:\n  a: {command: x}\n")
    assert_problem(err, "dag_id", 1, "required field is missing")


@pytest.mark.parametrize("tasks", ["{}", "[a, b]", "x"])
def test_tasks_must_be_a_non_empty_mapping(tasks: str) -> None:
    err = errors(f"dag_id: d\ntasks: {tasks}\n")
    assert_problem(err, "tasks", 2, "expected a non-empty mapping of task id to task")


def test_task_must_be_a_mapping() -> None:
    err = errors("dag_id: d\ntasks:\n  a: {command: x}\n  b: echo hi\n")
    assert_problem(err, "tasks.b", 4, "expected a mapping of task fields")


def test_defaults_must_be_a_mapping() -> None:
    err = errors("dag_id: d\ndefaults: [retries]\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "defaults", 2, "expected a mapping of task fields")


# --- unknown keys and wrong types


def test_unknown_top_level_key() -> None:
    err = errors("dag_id: d\nschedul: '@daily'\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "schedul", 2, "unknown field")


def test_unknown_task_key() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            retry: 3
        """
    )
    assert_problem(err, "tasks.a.retry", 5, "unknown field")


def test_unknown_nested_key() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            resources:
              requests: {cpu: 1, gpu: 1}
        """
    )
    assert_problem(err, "tasks.a.resources.requests.gpu", 6, "unknown field")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("retries", "many", "valid integer"),
        ("pool_slots", "[1]", "valid integer"),
        ("priority", "high", "valid integer"),
        ("timeout", "soon", "expected a duration such as 500ms"),
        ("retry_delay", "-5s", "expected a duration such as 500ms"),
        ("env", "[A]", "valid dictionary"),
        ("depends_on", "{b: 1}", "valid tuple"),
        ("secrets", "['bad name!']", "should match pattern"),
    ],
)
def test_wrong_types_name_the_task_field(field: str, value: str, expected: str) -> None:
    err = errors(f"dag_id: d\ntasks:\n  a:\n    command: x\n    {field}: {value}\n")
    problem = next(p for p in err.problems if p.field.startswith(f"tasks.a.{field}"))
    assert problem.line == 5, str(err)
    assert expected in problem.message
    assert str(err).startswith(f"{PATH}:5: tasks.a.{field}")


def test_wrong_type_quotes_the_input() -> None:
    err = errors("dag_id: d\ntasks:\n  a:\n    command: x\n    retries: many\n")
    assert_problem(err, "tasks.a.retries", 5, "got 'many'")


@pytest.mark.parametrize("command", ["5", "[sleep, 5]", "{run: x}", "[]", "''", "'   '"])
def test_bad_command_is_reported_at_command(command: str) -> None:
    err = errors(f"dag_id: d\ntasks:\n  a:\n    command: {command}\n")
    assert_problem(err, "tasks.a.command", 4, "argv list")


def test_bad_env_name() -> None:
    err = errors("dag_id: d\ntasks:\n  a:\n    command: x\n    env: {1BAD: x}\n")
    assert_problem(err, "tasks.a.env", 5, "'1BAD' is not valid")


def test_bad_quantity() -> None:
    err = errors(
        "dag_id: d\ntasks:\n  a:\n    command: x\n    resources:\n      limits: {memory: lots}\n"
    )
    assert_problem(err, "tasks.a.resources.limits.memory", 6, "Kubernetes quantity", "'lots'")


def test_bad_dag_id() -> None:
    err = errors("dag_id: Nightly Sales\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "dag_id", 1, "should match pattern")


def test_bad_task_id() -> None:
    err = errors("dag_id: d\ntasks:\n  'a b': {command: x}\n")
    assert_problem(err, "tasks.a b", 3, "task id must match")


def test_bad_schedule_is_reported_at_schedule() -> None:
    err = errors("dag_id: d\nschedule: '61 * * * *'\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "schedule", 2, "minute: 61 is outside 0-59")


def test_bad_timezone_is_reported_at_timezone() -> None:
    err = errors("dag_id: d\nschedule: '@daily'\ntimezone: Mars/Base\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "timezone", 3, "unknown time zone 'Mars/Base'")


def test_bad_timezone_without_schedule() -> None:
    err = errors("dag_id: d\ntimezone: Mars/Base\ntasks:\n  a: {command: x}\n")
    assert_problem(err, "timezone", 2, "unknown time zone 'Mars/Base'")


def test_toleration_exists_with_value() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            execution:
              tolerations:
                - {key: k, operator: Exists, value: v}
        """
    )
    assert_problem(err, "tasks.a.execution.tolerations.0", 7, "must not set a value")


def test_every_problem_is_listed() -> None:
    err = errors(
        """
        dag_id: d
        max_active_tasks: 0
        tasks:
          a:
            command: x
            retries: -1
          b:
            pool_slots: 0
        """
    )
    fields = {p.field for p in err.problems}
    assert fields == {
        "max_active_tasks",
        "tasks.a.retries",
        "tasks.b.pool_slots",
        "tasks.b.command",
    }
    assert len(str(err).splitlines()) == 4


# --- missing command


def test_missing_command_says_where_to_set_it() -> None:
    err = errors("dag_id: d\ntasks:\n  a:\n    retries: 2\n")
    assert_problem(
        err,
        "tasks.a.command",
        3,
        "required field is missing (set it on the task or in defaults)",
    )


# --- limits


@pytest.mark.parametrize(
    ("text", "field", "line", "fragment"),
    [
        ("max_active_tasks: 0\n", "max_active_tasks", 2, "greater than or equal to 1, got 0"),
        ("max_active_tasks: -3\n", "max_active_tasks", 2, "got -3"),
        ("max_active_runs: 0\n", "max_active_runs", 2, "greater than or equal to 1, got 0"),
    ],
)
def test_dag_limits_must_be_positive(text: str, field: str, line: int, fragment: str) -> None:
    err = errors(f"dag_id: d\n{text}tasks:\n  a: {{command: x}}\n")
    assert_problem(err, field, line, fragment)


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("pool_slots: 0", "pool_slots", "greater than or equal to 1, got 0"),
        ("pool_slots: -1", "pool_slots", "got -1"),
        ("retries: -1", "retries", "greater than or equal to 0, got -1"),
        ("retries: 101", "retries", "less than or equal to 100"),
        ("timeout: -1", "timeout", ">= 0"),
    ],
)
def test_task_limits(text: str, field: str, fragment: str) -> None:
    err = errors(f"dag_id: d\ntasks:\n  a:\n    command: x\n    {text}\n")
    assert_problem(err, f"tasks.a.{field}", 5, fragment)


# --- dependencies


def test_unknown_upstream_names_the_task() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a: {command: x}
          b:
            command: x
            depends_on: [a, extrakt]
        """
    )
    assert_problem(err, "tasks.b.depends_on.1", 6, "unknown task 'extrakt'", "a, b")


def test_self_dependency() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            depends_on: [a]
        """
    )
    assert_problem(err, "tasks.a.depends_on.0", 5, "a task cannot depend on itself")
    assert "cycle" not in str(err)


def test_two_cycle_is_named() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            depends_on: [b]
          b:
            command: x
            depends_on: [a]
        """
    )
    assert_problem(err, "tasks.a.depends_on", 5, "dependency cycle: a -> b -> a")


def test_three_cycle_is_named_in_run_order() -> None:
    # a runs before c, c before b, b before a.
    err = errors(
        """
        dag_id: d
        tasks:
          a:
            command: x
            depends_on: [b]
          b:
            command: x
            depends_on: [c]
          c:
            command: x
            depends_on: [a]
          tail:
            command: x
            depends_on: [a]
        """
    )
    assert_problem(
        err,
        "tasks.a.depends_on",
        5,
        "dependency cycle: a -> c -> b -> a (each task would have to run before the next)",
    )


def test_cycle_below_an_acyclic_start() -> None:
    err = errors(
        """
        dag_id: d
        tasks:
          start: {command: x}
          x:
            command: x
            depends_on: [start, y]
          y:
            command: x
            depends_on: [x]
        """
    )
    problem = only(err)
    assert "dependency cycle: " in problem.message
    cycle = problem.message.split(": ", 1)[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1]
    assert sorted(cycle[:-1]) == ["x", "y"]
    assert problem.field == f"tasks.{cycle[0]}.depends_on"


def test_diamond_is_not_a_cycle() -> None:
    spec = parse_dag(
        dedent(
            """
            dag_id: d
            tasks:
              a: {command: x}
              b: {command: x, depends_on: [a]}
              c: {command: x, depends_on: [a]}
              d: {command: x, depends_on: [b, c]}
            """
        ),
        PATH,
    )
    assert spec.tasks["d"].depends_on == ("b", "c")


# --- pools and passthrough


def test_unknown_pool() -> None:
    text = "dag_id: d\ntasks:\n  a:\n    command: x\n    pool: warehous\n"
    err = errors(text, LoadOptions(known_pools={"warehouse"}))
    assert_problem(err, "tasks.a.pool", 5, "unknown pool 'warehous'", "default_pool, warehouse")


def test_known_and_default_pools_load() -> None:
    text = "dag_id: d\ntasks:\n  a: {command: x, pool: warehouse}\n  b: {command: x}\n"
    spec = parse_dag(text, PATH, LoadOptions(known_pools={"warehouse"}))
    assert spec.used_pools() == {"warehouse", DEFAULT_POOL}


def test_pools_not_checked_without_known_pools() -> None:
    spec = parse_dag("dag_id: d\ntasks:\n  a: {command: x, pool: anything}\n", PATH)
    assert spec.tasks["a"].pool == "anything"


EXECUTION = """
dag_id: d
tasks:
  a:
    command: x
    execution:
      node_selector: {disk: ssd}
      tolerations: [{key: k, operator: Exists}]
"""


def test_passthrough_field_not_allowed() -> None:
    err = errors(EXECUTION, LoadOptions(passthrough={"node_selector"}))
    assert_problem(
        err,
        "tasks.a.execution.tolerations",
        7,
        "task 'a'",
        "execution.tolerations",
        "add 'tolerations' to taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH)",
    )
    assert PASSTHROUGH_SETTING == "taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH)"


def test_nothing_allowed_reports_every_field() -> None:
    err = errors(EXECUTION, LoadOptions(passthrough=()))
    assert {p.field for p in err.problems} == {
        "tasks.a.execution.node_selector",
        "tasks.a.execution.tolerations",
    }


def test_passthrough_allowed_loads() -> None:
    spec = parse_dag(EXECUTION, PATH, LoadOptions(passthrough={"node_selector", "tolerations"}))
    assert spec.tasks["a"].execution.declared() == ["node_selector", "tolerations"]


def test_passthrough_not_checked_when_none() -> None:
    spec = parse_dag(EXECUTION, PATH, LoadOptions(passthrough=None))
    assert spec.tasks["a"].execution.node_selector == {"disk": "ssd"}


def test_ephemeral_storage_not_allowed() -> None:
    text = """
    dag_id: d
    tasks:
      a:
        command: x
        resources:
          requests: {cpu: 1}
          limits: {ephemeral_storage: 5Gi}
    """
    err = errors(text, LoadOptions(passthrough={"tolerations"}))
    assert_problem(
        err,
        "tasks.a.resources.limits.ephemeral_storage",
        7,
        "task 'a'",
        "resources.limits.ephemeral_storage",
        "add 'ephemeral_storage' to taskPodPassthrough (LEOFLOW_TASK_POD_PASSTHROUGH)",
    )
    spec = parse_dag(dedent(text), PATH, LoadOptions(passthrough={"ephemeral_storage"}))
    assert spec.tasks["a"].resources.limits.ephemeral_storage == "5Gi"


# --- defaults


def test_error_in_defaults_is_reported_once_at_defaults() -> None:
    err = errors(
        """
        dag_id: d
        defaults:
          command: x
          retries: -1
        tasks:
          a: {}
          b: {}
          c: {retries: 1}
        """
    )
    problem = only(err)
    assert problem.field == "defaults.retries"
    assert problem.line == 4
    assert str(err) == (
        f"{PATH}:4: defaults.retries: input should be greater than or equal to 0, got -1"
    )


def test_unknown_key_in_defaults_is_reported_once() -> None:
    err = errors(
        "dag_id: d\ndefaults:\n  retrys: 2\ntasks:\n  a: {command: x}\n  b: {command: x}\n"
    )
    problem = only(err)
    assert (problem.field, problem.line, problem.message) == (
        "defaults.retrys",
        3,
        "unknown field; did you mean 'retries'?",
    )


def test_bad_command_in_defaults_is_reported_once_at_defaults() -> None:
    err = errors("dag_id: d\ndefaults:\n  command: 5\ntasks:\n  a: {}\n  b: {}\n")
    problem = only(err)
    assert (problem.field, problem.line) == ("defaults.command", 3)


def test_task_error_beside_defaults_error() -> None:
    err = errors(
        """
        dag_id: d
        defaults:
          timeout: soon
        tasks:
          a: {command: x, pool_slots: 0}
        """
    )
    assert_problem(err, "defaults.timeout", 3, "expected a duration")
    assert_problem(err, "tasks.a.pool_slots", 5, "greater than or equal to 1")
    assert len(err.problems) == 2


# --- files and folders


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text).lstrip("\n"))
    return path


def test_load_dag_file(tmp_path: Path) -> None:
    path = write(tmp_path, "one.yaml", "dag_id: one\ntasks:\n  a: {command: x}\n")
    loaded = load_dag_file(path)
    assert loaded.spec.dag_id == "one"
    assert loaded.path == path
    assert loaded.source == path.read_text()


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(DagFileError) as info:
        load_dag_file(path)
    assert str(info.value).startswith(f"{path}: cannot read file")


def test_folder_loads_good_file_and_reports_bad_one(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", "dag_id: good\ntasks:\n  a: {command: x}\n")
    bad = write(
        tmp_path, "sub/bad.yml", "dag_id: bad\ntasks:\n  a:\n    command: x\n    pool_slots: 0\n"
    )
    write(tmp_path, "notes.txt", "not: [a dag\n")
    result = load_dag_folder(tmp_path)
    assert list(result.dags) == ["good"]
    assert result.dags["good"].path == tmp_path / "good.yaml"
    assert len(result.errors) == 1
    assert result.errors[0].path == bad
    assert str(result.errors[0]).startswith(f"{bad}:5: tasks.a.pool_slots: ")


def test_duplicate_dag_id_names_the_first_file(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", "dag_id: same\ntasks:\n  a: {command: x}\n")
    second = write(tmp_path, "b.yaml", "dag_id: same\ntasks:\n  b: {command: y}\n")
    result = load_dag_folder(tmp_path)
    assert list(result.dags) == ["same"]
    assert result.dags["same"].path == first
    assert [e.path for e in result.errors] == [second]
    problem = only(result.errors[0])
    assert problem.field == "dag_id"
    assert problem.line == 1
    assert (
        str(result.errors[0])
        == f"{second}:1: dag_id: duplicate dag_id 'same': already defined in {first}"
    )


def test_missing_folder(tmp_path: Path) -> None:
    result = load_dag_folder(tmp_path / "nope")
    assert result.dags == {}
    assert str(result.errors[0]) == f"{tmp_path / 'nope'}: no such file or directory"


def test_dag_files_single_file_and_suffixes(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "x: 1\n")
    b = write(tmp_path, "deep/er/b.yml", "x: 1\n")
    write(tmp_path, "c.json", "{}\n")
    assert dag_files(tmp_path) == [a, b]
    assert dag_files(a) == [a]


# --- Lite notice


def test_lite_ignored_fields() -> None:
    spec = parse_dag(dedent(GOOD), PATH)
    assert lite_ignored_fields(spec) == ["execution", "image", "resources"]
    plain = parse_dag("dag_id: d\ntasks:\n  a: {command: x}\n", PATH)
    assert lite_ignored_fields(plain) == []
