"""The API's response and request bodies (pydantic), and converters from store rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from leoflow.domain.catalogue import parse_spec
from leoflow.domain.dag import DagSpec
from leoflow.domain.outputs import item_of
from leoflow.domain.states import RunState, TaskState
from leoflow.domain.stored_json import read_stored_json
from leoflow.domain.task_instance import TaskInstance
from leoflow.store.rows import DagRow, RunRow

RUN_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:+~-]{0,249}$"
POOL_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"
FILE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"


def ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ----------------------------------------------------------------------- DAGs


class DagSummary(_Out):
    dag_id: str
    fileloc: str
    paused: bool
    active: bool
    description: str | None
    schedule: str | None
    asset_schedule: dict[str, Any] | None = Field(
        None, description="schedule.assets as a tree of {all: [...]} / {any: [...]}, if any"
    )
    timezone: str
    max_active_runs: int
    max_active_tasks: int
    tags: list[str]
    task_count: int
    updated_at: datetime | None
    last_error: str | None = Field(description="the import error of the DAG's file, if any")


class ImportError_(_Out):
    fileloc: str
    error: str


class DagList(_Out):
    dags: list[DagSummary]
    import_errors: list[ImportError_]


class TaskOut(_Out):
    task_id: str
    depends_on: list[str]
    command: list[str] | str
    pool: str
    pool_slots: int
    priority: int
    retries: int
    retry_delay: float
    timeout: float | None


class DbtOrigin(_Out):
    """Which dbt project a DAG's ``dbt.*`` tasks came from (resolved by ``leoflow dags apply``)."""

    project: str
    project_dir: str = Field(description="where the tasks' image must hold the project")
    manifest_sha256: str
    nodes: int = Field(description="how many tasks the project's nodes became")
    tasks: list[str]


class DagDetail(DagSummary):
    source: str | None
    tasks: list[TaskOut]
    spec: dict[str, Any]
    dbt: DbtOrigin | None = Field(
        None, description="set when the DAG's dbt section was resolved from a dbt project"
    )


def dbt_origin(spec: DagSpec | None) -> DbtOrigin | None:
    resolved = spec.dbt.resolved if spec is not None and spec.dbt is not None else None
    if resolved is None:
        return None
    return DbtOrigin(
        project=resolved.project,
        project_dir=resolved.project_dir,
        manifest_sha256=resolved.manifest_sha256,
        nodes=resolved.nodes,
        tasks=list(resolved.tasks),
    )


class Problem(_Out):
    file: str
    field: str
    line: int | None
    message: str


class DagValidationError(_Out):
    message: str
    file: str
    problems: list[Problem]


class DagValidationResponse(_Out):
    detail: DagValidationError


class ApplyResult(_Out):
    dag_id: str
    created: bool
    changed: bool
    fileloc: str
    previous_fileloc: str | None
    task_count: int


def _spec(row: DagRow) -> DagSpec | None:
    try:
        return parse_spec(row.spec_json)
    except ValueError:
        return None


def dag_summary(row: DagRow, spec: DagSpec | None = None) -> DagSummary:
    spec = spec or _spec(row)
    return DagSummary(
        dag_id=row.dag_id,
        fileloc=row.fileloc,
        paused=row.paused,
        active=row.active,
        description=spec.description if spec else None,
        schedule=spec.schedule if spec else None,
        asset_schedule=spec.asset_schedule if spec else None,
        timezone=spec.timezone if spec else "UTC",
        max_active_runs=spec.max_active_runs if spec else 0,
        max_active_tasks=spec.max_active_tasks if spec else 0,
        tags=list(spec.tags) if spec else [],
        task_count=len(spec.tasks) if spec else 0,
        updated_at=ts(row.updated_at),
        last_error=row.last_error,
    )


def dag_detail(row: DagRow) -> DagDetail:
    spec = _spec(row)
    summary = dag_summary(row, spec)
    tasks = [
        TaskOut(
            task_id=t.task_id,
            depends_on=list(t.depends_on),
            command=t.command,
            pool=t.pool,
            pool_slots=t.pool_slots,
            priority=t.priority,
            retries=t.retries,
            retry_delay=t.retry_delay,
            timeout=t.timeout,
        )
        for t in (spec.tasks.values() if spec else ())
    ]
    return DagDetail(
        **summary.model_dump(),
        source=row.source,
        tasks=tasks,
        spec=spec.model_dump(mode="json") if spec else {},
        dbt=dbt_origin(spec),
    )


# ----------------------------------------------------------------------- runs


class RunOut(_Out):
    pk: int
    dag_id: str
    run_id: str
    state: RunState
    run_type: str
    logical_date: datetime | None
    conf: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    message: str | None
    deadline_missed_at: datetime | None = Field(
        None, description="when the run was found past its DAG's deadline; null if not"
    )


class RunPage(_Out):
    runs: list[RunOut]
    next_cursor: int | None = Field(
        description="pass as ?before= for the next (older) page; null on the last page"
    )


class TriggerIn(_In):
    conf: dict[str, Any] = Field(default_factory=dict)
    run_id: str | None = Field(None, pattern=RUN_ID_PATTERN)


def run_out(row: RunRow) -> RunOut:
    return RunOut(
        pk=row.pk,
        dag_id=row.dag_id,
        run_id=row.run_id,
        state=row.state,
        run_type=row.run_type,
        logical_date=ts(row.logical_date),
        conf=row.conf,
        created_at=datetime.fromtimestamp(row.created_at, UTC),
        started_at=ts(row.started_at),
        ended_at=ts(row.ended_at),
        message=row.message,
        deadline_missed_at=ts(row.deadline_missed_at),
    )


# -------------------------------------------------------------- task instances


def _stamp(value: object) -> object:
    return ts(float(value)) if isinstance(value, int | float) else value


# A store timestamp (epoch seconds) as the API shows it, converted exactly as ``ts``.
Stamp = Annotated[datetime | None, BeforeValidator(_stamp)]


class TaskInstanceOut(_Out):
    """``leoflow.domain.task_instance.TaskInstance`` as the API shows it."""

    model_config = ConfigDict(from_attributes=True)

    pk: int
    dag_id: str
    run_id: str
    task_id: str
    state: TaskState
    try_number: int
    max_tries: int
    pool: str
    pool_slots: int
    priority: int
    ready_at: Stamp
    queued_at: Stamp
    started_at: Stamp
    ended_at: Stamp
    next_retry_at: Stamp
    heartbeat_at: Stamp
    exit_code: int | None
    reason: str | None
    message: str | None
    output: Any = Field(
        None,
        description="the JSON value its last successful try wrote to $LEOFLOW_OUTPUT "
        "(null: none); its downstream tasks get it as LEOFLOW_INPUT_<TASK>",
    )
    map_index: int | None = Field(
        None, description="for one item of a mapped task (task_id 'task[3]'): its index"
    )
    map_item: Any = Field(None, description="for one item of a mapped task: the item")


class TaskInstancePage(_Out):
    task_instances: list[TaskInstanceOut]
    next_cursor: int | None = Field(
        description="pass as ?after= for the next page; null on the last page"
    )


def ti_out(row: TaskInstance) -> TaskInstanceOut:
    out = TaskInstanceOut.model_validate(row, from_attributes=True)
    # Stored as JSON text (checked when it was recorded); shown as the value itself.
    item = item_of(row.task_id) if row.map_item is not None else None
    return out.model_copy(
        update={
            "output": read_stored_json(row.output, "output") if row.output else None,
            "map_index": item[1] if item is not None else None,
            "map_item": read_stored_json(row.map_item, "map item"),
        }
    )


class ClearResult(_Out):
    cleared: list[str] = Field(
        description="the tasks cleared (finished run), or that the request will clear"
    )
    run: RunOut
    pending: bool = Field(
        default=False,
        description="true (status 202) for a running run: the scheduler applies the clear "
        "on its next poll, stopping the live tries",
    )
    request_id: int | None = Field(default=None, description="the clear request (pending only)")


class Blocker(_Out):
    reason: str
    message: str
    used: int | None
    limit: int | None
    needed: int | None


class Upstream(_Out):
    task_id: str
    state: TaskState


class WhyOut(_Out):
    task_id: str
    state: TaskState
    waiting: bool
    reason: str
    message: str
    used: int | None
    limit: int | None
    needed: int | None
    also: list[Blocker]
    upstreams: list[Upstream]
    retry_at: datetime | None


# ----------------------------------------------------------------------- pools


class PoolOut(_Out):
    name: str
    slots: int
    description: str
    occupied: int = Field(description="pool slots held by queued and running task instances")
    queued: int
    running: int
    source: Literal["store", "settings", "default"]


class PoolList(_Out):
    pools: list[PoolOut]


class PoolIn(_In):
    name: str = Field(pattern=POOL_NAME_PATTERN)
    slots: int = Field(ge=0, le=1_000_000)
    description: str = Field("", max_length=1000)


class PoolPatch(_In):
    slots: int | None = Field(None, ge=0, le=1_000_000)
    description: str | None = Field(None, max_length=1000)


# ---------------------------------------------------------------------- health


class Health(_Out):
    status: str


class ErrorOut(_Out):
    detail: str
