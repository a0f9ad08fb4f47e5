"""Hostile and careless DAG files: each is refused with file, line and field, and cheaply."""

from __future__ import annotations

import tracemalloc
from collections.abc import Collection, Iterator
from pathlib import Path
from textwrap import dedent

import pytest

from leoflow.dagfile.loader import LoadOptions, load_dag_file, load_dag_folder, parse_dag
from leoflow.dagfile.problems import DagFileError, Problem
from leoflow.dagfile.yamldoc import MAX_DEPTH, MAX_DOCUMENT_CHARS
from leoflow.domain.progress import topological_order

PATH = Path("dags/hostile.yaml")
HEAD = "dag_id: hostile\n"


def refused(text: str) -> Problem:
    with pytest.raises(DagFileError) as info:
        parse_dag(text, PATH)
    assert len(info.value.problems) == 1, str(info.value)
    return info.value.problems[0]


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        name, prev = chr(97 + i), chr(96 + i)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return HEAD + "tasks: {t: {command: echo}}\n" + "\n".join(lines) + "\n"


# --- aliases


def test_billion_laughs_is_refused_at_the_alias_that_overflows_in_a_few_mb() -> None:
    text = billion_laughs()
    assert len(text) < 700
    tracemalloc.start()
    try:
        problem = refused(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "aliases expand this document beyond" in problem.message
    assert problem.line is not None and 3 <= problem.line <= 11
    assert peak < 4_000_000, peak


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    problem = refused(HEAD + "tasks: &t\n  a: {command: echo, env: *t}\n")
    assert problem.line == 3
    assert "alias *t refers to a value that contains it" in problem.message


def test_an_unknown_alias_is_refused_with_its_line() -> None:
    problem = refused(HEAD + "tasks:\n  a: {command: echo}\n  b: *nowhere\n")
    assert problem.line == 4
    assert "unknown alias *nowhere" in problem.message


def test_merge_keys_apply_and_explicit_keys_win() -> None:
    spec = parse_dag(
        HEAD
        + dedent(
            """\
            tasks:
              first: &base {command: echo, retries: 2, pool: default_pool}
              second: {<<: *base, retries: 5}
              third:
                <<: [*base]
                command: [echo, third]
            """
        ),
        PATH,
    )
    assert spec.tasks["second"].retries == 5
    assert spec.tasks["second"].command == "echo"
    assert spec.tasks["third"].retries == 2
    assert spec.tasks["third"].command == ["echo", "third"]


def test_a_merge_of_a_scalar_is_refused() -> None:
    problem = refused(HEAD + "tasks:\n  a: &x {command: echo}\n  b: {<<: 3}\n")
    assert "a << merge takes a mapping" in problem.message
    assert problem.field == "tasks.b"


def test_an_alias_cannot_nest_the_document_beyond_the_depth_limit() -> None:
    deep = "[" * (MAX_DEPTH - 3) + "]" * (MAX_DEPTH - 3)
    problem = refused(HEAD + f"x: &deep {deep}\ntasks: {{a: {{command: echo, env: [*deep]}}}}\n")
    assert "nests the document more than" in problem.message


def test_python_tags_are_refused() -> None:
    problem = refused(HEAD + "tasks: {a: {command: !!python/object/apply:os.system [id]}}\n")
    assert "unsupported YAML tag" in problem.message
    assert problem.line == 2


# --- size and depth


def test_nesting_beyond_the_limit_is_refused_with_the_field() -> None:
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    problem = refused(HEAD + f"tasks:\n  a:\n    command: echo\n    env: {deep}\n")
    assert f"nested more than {MAX_DEPTH} levels deep" in problem.message
    assert problem.field.startswith("tasks.a.env")
    assert problem.line == 5


def test_a_file_over_the_size_limit_is_refused_after_reading_only_the_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(HEAD.encode() + b"#" * (MAX_DOCUMENT_CHARS + 10) + b"\n")
    with pytest.raises(DagFileError) as info:
        load_dag_file(path)
    assert "larger than" in str(info.value)
    with pytest.raises(DagFileError) as info:
        parse_dag(HEAD + "#" * (MAX_DOCUMENT_CHARS + 10), PATH)
    assert "a DAG file may have at most" in str(info.value)


def test_a_fifo_under_a_yaml_name_is_refused_not_read(tmp_path: Path) -> None:
    import os

    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    with pytest.raises(DagFileError, match="not a regular file"):
        load_dag_file(path)


# --- duplicate keys


@pytest.mark.parametrize(
    ("text", "field", "line", "first"),
    [
        (HEAD + "dag_id: again\ntasks: {a: {command: echo}}\n", "dag_id", 2, 1),
        ("dag_id: d\ntasks:\n  a: {command: echo}\n  a: {command: ls}\n", "tasks.a", 4, 3),
        (
            "dag_id: d\ntasks:\n  a:\n    command: echo\n    retries: 1\n    retries: 3\n",
            "tasks.a.retries",
            6,
            5,
        ),
        ("dag_id: d\ntasks:\n  a: {command: echo, env: {X: 1, X: 2}}\n", "tasks.a.env.X", 3, 3),
    ],
)
def test_a_duplicate_key_names_both_lines(text: str, field: str, line: int, first: int) -> None:
    problem = refused(text)
    assert problem.field == field
    assert problem.line == line
    assert f"also set at line {first}" in problem.message
    assert problem.render(PATH).startswith(f"{PATH}:{line}: {field}: duplicate key")


# --- control characters


@pytest.mark.parametrize(
    ("fragment", "field", "char"),
    [
        ('command: "echo \\0 x"', "tasks.a.command", "U+0000 (NUL)"),
        ('command: [echo, "\\e[2J"]', "tasks.a.command.1", "U+001B (ESC)"),
        ('command: echo, env: {A: "x\\0"}', "tasks.a.env.A", "U+0000 (NUL)"),
        ('command: echo, pool: "p\\a"', "tasks.a.pool", "U+0007"),
        ('command: echo, secrets: ["s\\x9b"]', "tasks.a.secrets.0", "U+009B"),
        ('command: echo, image: "i\\x7f"', "tasks.a.image", "U+007F"),
    ],
)
def test_control_characters_in_values_are_refused_with_the_field(
    fragment: str, field: str, char: str
) -> None:
    problem = refused(HEAD + "tasks:\n  a: {" + fragment + "}\n")
    assert problem.field == field
    assert problem.line == 3
    assert f"control character {char} is not allowed" in problem.message


@pytest.mark.parametrize(
    ("key", "shown"),
    [('"a\\0b"', "a\\x00b"), ('"t\\e[31m"', "t\\x1b[31m"), ('"a\\nb"', "a\\x0ab")],
)
def test_control_characters_in_keys_are_refused_and_shown_escaped(key: str, shown: str) -> None:
    problem = refused(HEAD + f"tasks:\n  {key}: {{command: echo}}\n")
    assert "is not allowed in a key" in problem.message
    rendered = problem.render(PATH)
    assert "\x1b" not in rendered and "\x00" not in rendered and "\n" not in rendered
    assert f"tasks.{shown}" in rendered


def test_control_characters_in_env_names_are_refused() -> None:
    problem = refused(HEAD + 'tasks:\n  a: {command: echo, env: {"A\\x01": x}}\n')
    assert problem.field == "tasks.a.env.A\x01"
    assert "tasks.a.env.A\\x01" in problem.render(PATH)


def test_newline_and_tab_are_fine_in_a_shell_command_and_env_values() -> None:
    spec = parse_dag(
        HEAD + 'tasks:\n  a: {command: "set -e\\n\\techo one\\necho two", env: {PEM: "a\\nb"}}\n',
        PATH,
    )
    assert spec.tasks["a"].command == "set -e\n\techo one\necho two"
    assert spec.tasks["a"].env == {"PEM": "a\nb"}


@pytest.mark.parametrize("field", ["pool", "image"])
def test_a_newline_in_a_one_line_name_is_refused(field: str) -> None:
    problem = refused(HEAD + f'tasks:\n  a: {{command: echo, {field}: "x\\ny"}}\n')
    assert problem.field == f"tasks.a.{field}"
    assert "expected one line" in problem.message


# --- deep graphs


def chain(n: int) -> str:
    body = "".join(f"  t{i}: {{command: echo, depends_on: [t{i - 1}]}}\n" for i in range(1, n))
    return HEAD + "tasks:\n  t0: {command: echo}\n" + body


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_10000_task_chain_validates_and_orders() -> None:
    spec = parse_dag(chain(10_000), PATH)
    assert len(spec.tasks) == 10_000
    assert topological_order(spec) == tuple(f"t{i}" for i in range(10_000))


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_10000_task_chain_walked_from_its_far_end_validates() -> None:
    # t0 depends on t1, ..., on t9999: a depth-first walk from t0 (the first id) is
    # 10,000 deep, far past Python's recursion limit.
    n = 10_000
    body = "".join(f"  t{i}: {{command: echo, depends_on: [t{i + 1}]}}\n" for i in range(n - 1))
    spec = parse_dag(HEAD + "tasks:\n" + body + f"  t{n - 1}: {{command: echo}}\n", PATH)
    order = topological_order(spec)
    assert order[0] == f"t{n - 1}" and order[-1] == "t0" and len(order) == n


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_10000_task_fan_out_and_fan_in_validate() -> None:
    n = 10_000
    text = (
        HEAD
        + "tasks:\n  root: {command: echo}\n"
        + "".join(f"  t{i}: {{command: echo, depends_on: [root]}}\n" for i in range(n))
        + "  sink: {command: echo, depends_on: ["
        + ",".join(f"t{i}" for i in range(n))
        + "]}\n"
    )
    spec = parse_dag(text, PATH)
    order = topological_order(spec)
    assert order[0] == "root" and order[-1] == "sink" and len(order) == n + 2


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_10000_task_cycle_is_found_and_reported_in_one_short_line() -> None:
    n = 10_000
    text = (
        HEAD
        + "tasks:\n"
        + "".join(f"  t{i}: {{command: echo, depends_on: [t{(i - 1) % n}]}}\n" for i in range(n))
    )
    problem = refused(text)
    assert problem.message.startswith("dependency cycle: ")
    assert f"{n - 10} more" in problem.message  # n + 1 names, 11 shown
    assert len(problem.message) < 300


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_cycle_below_a_long_chain_names_its_tasks() -> None:
    text = chain(5_000) + "  x: {command: echo, depends_on: [t4999, y]}\n"
    text += "  y: {command: echo, depends_on: [x]}\n"
    problem = refused(text)
    assert "dependency cycle" in problem.message
    assert "x -> y -> x" in problem.message or "y -> x -> y" in problem.message


# --- schedules


def test_a_cron_that_can_never_fire_is_a_load_error_at_schedule() -> None:
    problem = refused(HEAD + "schedule: '0 0 31 2 *'\ntasks: {a: {command: echo}}\n")
    assert problem.field == "schedule"
    assert problem.line == 2
    assert "never fire" in problem.message


# --- a bug in the loader is one broken file


class _PoolsFailingOnce(Collection[str]):
    """A pool list that fails the first time it is read, standing in for a loader bug."""

    def __init__(self) -> None:
        self.reads = 0

    def __contains__(self, item: object) -> bool:
        return item == "p"

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        if self.reads == 1:
            raise RuntimeError("pool lookup exploded")
        return iter(["p"])

    def __len__(self) -> int:
        return 1


def test_an_unexpected_error_for_one_file_is_that_files_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("dag_id: a\ntasks: {t: {command: echo, pool: p}}\n")
    (tmp_path / "b.yaml").write_text("dag_id: b\ntasks: {t: {command: echo}}\n")
    result = load_dag_folder(tmp_path, LoadOptions(known_pools=_PoolsFailingOnce()))
    assert [e.path.name for e in result.errors] == ["a.yaml"]
    assert sorted(result.dags) == ["b"]
    assert "internal error while loading this file (RuntimeError: pool lookup exploded)" in str(
        result.errors[0]
    )
