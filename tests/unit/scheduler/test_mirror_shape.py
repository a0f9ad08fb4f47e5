"""The scheduler's mutable mirror keeps the task-instance record's field names and types."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

from leoflow.domain.states import TaskState
from leoflow.domain.task_instance import TaskInstance
from leoflow.scheduler.mirror import MIRRORED_FIELDS, TaskMirror


def test_every_mirror_field_is_a_record_field_of_the_same_type() -> None:
    record = get_type_hints(TaskInstance)
    mirror = get_type_hints(TaskMirror)
    assert set(MIRRORED_FIELDS) == {f.name for f in fields(TaskMirror)}
    for name in MIRRORED_FIELDS:
        assert name in record, f"TaskMirror.{name} is not a TaskInstance field"
        assert mirror[name] == record[name], name


def test_from_row_copies_each_mirrored_field() -> None:
    values: dict[str, object] = {f.name: None for f in fields(TaskInstance)}
    values.update(pk=3, run_pk=2, dag_id="d", run_id="r", task_id="t", state=TaskState.QUEUED)
    values.update(try_number=1, max_tries=2, pool="p", pool_slots=2, priority=5, updated_at=9.0)
    values.update(ready_at=1.5, heartbeat_at=4.0, reason="lost", executor_ref="pid:7")
    row = TaskInstance(**values)  # type: ignore[arg-type]
    ti = TaskMirror.from_row(row)
    assert {name: getattr(ti, name) for name in MIRRORED_FIELDS} == {
        name: getattr(row, name) for name in MIRRORED_FIELDS
    }
