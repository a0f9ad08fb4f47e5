"""The DAG spec models on their own, without YAML."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from leoflow.domain.dag import (
    DEFAULT_POOL,
    DagSpec,
    Execution,
    ResourceAmounts,
    TaskFields,
    TaskSpec,
    Toleration,
)


def task(task_id: str = "a", **fields: Any) -> TaskSpec:
    fields.setdefault("command", "true")
    return TaskSpec(task_id=task_id, **fields)


def dag(*tasks: TaskSpec, **fields: Any) -> DagSpec:
    return DagSpec(dag_id="d", tasks={t.task_id: t for t in tasks}, **fields)


def error_locs(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[str, ...]]:
    return [tuple(str(p) for p in e["loc"]) for e in exc.value.errors()]


def test_task_defaults() -> None:
    t = task()
    assert (t.retries, t.retry_delay, t.timeout, t.pool, t.pool_slots, t.priority) == (
        0,
        0.0,
        None,
        DEFAULT_POOL,
        1,
        0,
    )
    assert t.env == {} and t.depends_on == () and t.secrets == ()
    assert t.execution.declared() == []
    assert t.max_tries == 1


def test_max_tries_counts_the_first_try() -> None:
    assert task(retries=3).max_tries == 4


def test_argv() -> None:
    assert task(command="echo hi && exit 3").argv() == ["/bin/sh", "-c", "echo hi && exit 3"]
    assert task(command=["python", "-c", "pass"]).argv() == ["python", "-c", "pass"]
    spec = task(command=["x"])
    spec.argv().append("y")
    assert spec.argv() == ["x"]  # a copy, not the model's list


def test_durations_parse_and_serialize_as_seconds() -> None:
    t = task(retry_delay="1m30s", timeout="500ms")
    assert (t.retry_delay, t.timeout) == (90.0, 0.5)
    dumped = t.model_dump()
    assert (dumped["retry_delay"], dumped["timeout"]) == (90.0, 0.5)
    assert TaskSpec.model_validate(dumped) == t


def test_env_values_become_strings() -> None:
    t = task(env={"N": 4, "F": 1.5, "ON": True, "OFF": False, "S": "x"})
    assert t.env == {"N": "4", "F": "1.5", "ON": "true", "OFF": "false", "S": "x"}


@pytest.mark.parametrize("name", ["1X", "A-B", "", "A B"])
def test_env_names_are_checked(name: str) -> None:
    with pytest.raises(ValidationError, match="environment variable name"):
        task(env={name: "x"})


@pytest.mark.parametrize("command", ["", "  ", [], [1], ["ok", None], 5, {"a": "b"}])
def test_command_must_be_argv_or_shell_string(command: object) -> None:
    with pytest.raises(ValidationError) as info:
        task(command=command)
    assert error_locs(info) == [("command",)]
    assert "expected a non-empty argv list of strings or a shell string" in str(info.value)


def test_command_is_required_on_a_task() -> None:
    with pytest.raises(ValidationError) as info:
        TaskSpec(task_id="a")  # type: ignore[call-arg]
    assert error_locs(info) == [("command",)]


def test_task_fields_all_optional_and_same_checks() -> None:
    assert TaskFields().model_dump(exclude_none=True) == {}
    with pytest.raises(ValidationError) as info:
        TaskFields(command="", retries=-1, pool_slots=0, secrets=["bad name"])
    assert sorted(loc[0] for loc in error_locs(info)) == [
        "command",
        "pool_slots",
        "retries",
        "secrets",
    ]


@pytest.mark.parametrize("task_id", ["", "-lead", "a b", "a/b", "x" * 201])
def test_bad_task_ids(task_id: str) -> None:
    with pytest.raises(ValidationError):
        task(task_id)


@pytest.mark.parametrize("task_id", ["a", "A_1", "extract.v2", "x-y", "_", "x" * 200])
def test_good_task_ids(task_id: str) -> None:
    assert task(task_id).task_id == task_id


@pytest.mark.parametrize("dag_id", ["", "Upper", "a.b", "a b", "x" * 201])
def test_bad_dag_ids(dag_id: str) -> None:
    with pytest.raises(ValidationError):
        DagSpec(dag_id=dag_id, tasks={"a": task()})


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"retries": -1}, "retries"),
        ({"retries": 101}, "retries"),
        ({"pool_slots": 0}, "pool_slots"),
        ({"timeout": "-1s"}, "timeout"),
        ({"retry_delay": "soon"}, "retry_delay"),
        ({"secrets": ["has space"]}, "secrets"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_task_field_limits(fields: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        task(**fields)
    assert [locs[0] for locs in error_locs(info)] == [loc]


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"max_active_runs": 0}, "max_active_runs"),
        ({"max_active_tasks": 0}, "max_active_tasks"),
        ({"schedule": "* * *"}, "schedule"),
        ({"schedule": "0 25 * * *"}, "schedule"),
        ({"timezone": "Nowhere/Town"}, "timezone"),
        ({"schedule": "@daily", "timezone": "Nowhere/Town"}, "timezone"),
        ({"owner": "me"}, "owner"),
    ],
)
def test_dag_field_checks(fields: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        dag(task(), **fields)
    assert [locs[0] for locs in error_locs(info)] == [loc]


def test_schedule_error_says_which_cron_field() -> None:
    with pytest.raises(ValidationError, match=r"hour: 25 is outside 0-23 \(in '0 25 \* \* \*'\)"):
        dag(task(), schedule="0 25 * * *")


def test_cron_binds_the_timezone() -> None:
    cron = dag(task(), schedule="0 3 * * *", timezone="Europe/Berlin").cron()
    assert cron is not None
    assert (cron.expression, cron.timezone, cron.hours) == (
        "0 3 * * *",
        "Europe/Berlin",
        frozenset({3}),
    )
    assert dag(task()).cron() is None


def test_downstream_and_pools() -> None:
    spec = dag(
        task("a"),
        task("b", depends_on=["a"], pool="p1"),
        task("c", depends_on=["a"]),
        task("d", depends_on=["b", "c"], pool="p2"),
    )
    assert spec.downstream() == {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}
    assert spec.used_pools() == {DEFAULT_POOL, "p1", "p2"}


def test_models_are_frozen() -> None:
    t = task()
    with pytest.raises(ValidationError):
        t.retries = 3  # type: ignore[misc]


@pytest.mark.parametrize("value", ["500m", "2", "1Gi", "512Mi", "1.5", ".5", "1e3", 2, 0.5])
def test_quantities(value: object) -> None:
    assert ResourceAmounts(cpu=value).cpu == str(value)


@pytest.mark.parametrize("value", ["lots", "-1", "1 Gi", "1gb", "", True, [1]])
def test_bad_quantities(value: object) -> None:
    with pytest.raises(ValidationError, match="Kubernetes quantity"):
        ResourceAmounts(memory=value)


def test_toleration_rules() -> None:
    assert Toleration(key="k", operator="Exists").value is None
    with pytest.raises(ValidationError, match="must not set a value"):
        Toleration(key="k", operator="Exists", value="v")
    with pytest.raises(ValidationError):
        Toleration(key="k", operator="In")
    with pytest.raises(ValidationError):
        Toleration(key="k", effect="Sometimes")


def test_execution_declared_lists_set_fields_in_declaration_order() -> None:
    ex = Execution(
        tolerations=[Toleration(key="k")],
        node_selector={"a": "b"},
        termination_grace_period_seconds=0,
    )
    assert ex.declared() == ["node_selector", "tolerations", "termination_grace_period_seconds"]
    with pytest.raises(ValidationError):
        Execution(termination_grace_period_seconds=-1)
