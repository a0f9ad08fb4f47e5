"""The DAG spec: what a ``leoflow.yaml`` file may say, as pydantic models.

Field names are a contract with DAG authors; unknown keys are errors.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from leoflow.domain.assets.condition import condition_uris, parse_condition, parse_schedule
from leoflow.domain.assets.uri import MAX_URI_CHARS, normalize_uri
from leoflow.domain.cron import CronError, CronSchedule, check_timezone
from leoflow.domain.dbt import DbtSpec
from leoflow.domain.durations import parse_duration
from leoflow.domain.mapping import DEFAULT_MAX_MAP_ITEMS, MAX_MAP_ITEMS, MapOver
from leoflow.domain.notify import NotifyRule
from leoflow.domain.timebounds import INT32_MAX, MAX_DURATION_SECONDS, OutOfRange, check_moment
from leoflow.domain.trigger_rules import TRIGGER_RULES, TriggerRule

DAG_ID_PATTERN = r"^[a-z0-9_-]{1,200}$"
TASK_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"
SECRET_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?$")

DEFAULT_POOL = "default_pool"
# The same rule as the API's pool names (leoflow/api/schemas.py POOL_NAME_PATTERN).
POOL_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"


def _bounded_duration(value: object) -> float:
    return parse_duration(value, MAX_DURATION_SECONDS)


# Bounded: a duration becomes a timer, a timedelta and a date in the store.
Duration = Annotated[
    float,
    BeforeValidator(_bounded_duration),
    PlainSerializer(lambda v: v, return_type=float),
]
# Every count a DAG sets lands in a 32-bit column or in memory (leoflow.domain.timebounds).
Count = Annotated[int, Field(ge=1, le=INT32_MAX)]
Priority = Annotated[int, Field(ge=-INT32_MAX, le=INT32_MAX)]
# What one scheduler holds at once: runs of a DAG, task instances a run may run.
MAX_ACTIVE_LIMIT = 100_000


def _quantity(value: object) -> str:
    text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _QUANTITY.match(text):
        raise ValueError(
            f"expected a Kubernetes quantity such as 500m, 2, 1Gi or 512Mi, got {value!r}"
        )
    return text


Quantity = Annotated[str, BeforeValidator(_quantity)]


def _one_line(value: object) -> object:
    # The YAML reader already refuses NUL, ESC and the other controls; names such as a
    # pool or an image are also one line, with no tab or newline to hide a second part.
    if isinstance(value, str) and any(char in value for char in "\t\n\r"):
        raise ValueError(f"expected one line without tabs, got {_short(value)}")
    return value


OneLine = Annotated[str, BeforeValidator(_one_line)]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _command(value: object) -> object:
    # One check with one message, so a wrong command is reported at ``command``
    # rather than once per member of the list-or-string union.
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(part, str) for part in value):
        return list(value)
    raise ValueError(
        f"expected a non-empty argv list of strings or a shell string, got {_short(value)}"
    )


Command = Annotated[list[str] | str, BeforeValidator(_command)]


def _trigger_rule(value: object) -> object:
    if isinstance(value, str) and value in TRIGGER_RULES:
        return value
    raise ValueError(
        f"unknown trigger rule {_short(value)}; expected one of: {', '.join(TRIGGER_RULES)}"
    )


TriggerRuleField = Annotated[TriggerRule, BeforeValidator(_trigger_rule)]


def _scalar_to_str(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _env(value: object) -> object:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
                raise ValueError(f"environment variable name {key!r} is not valid")
        return {k: _scalar_to_str(v) for k, v in value.items()}
    return value


# YAML reads ``WORKERS: 4`` as an int; an environment only holds strings.
EnvVars = Annotated[dict[str, str], BeforeValidator(_env)]
SecretName = Annotated[str, Field(pattern=SECRET_NAME_PATTERN)]


def _uri_list(value: object) -> object:
    if isinstance(value, list | tuple):
        return value
    raise ValueError(f"expected a list of asset URIs or names, got {_short(value)}")


def _unique(value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value))


# Normalised as they are read (leoflow.domain.assets.uri): two spellings, one asset.
AssetUri = Annotated[
    str,
    BeforeValidator(normalize_uri),
    Field(
        max_length=MAX_URI_CHARS,
        description="an asset URI (s3://bucket/key, duckdb://db/schema.table) or a plain name",
    ),
]
AssetUris = Annotated[tuple[AssetUri, ...], BeforeValidator(_uri_list), AfterValidator(_unique)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ResourceAmounts(_Strict):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    ephemeral_storage: Quantity | None = None


class Resources(_Strict):
    requests: ResourceAmounts = ResourceAmounts()
    limits: ResourceAmounts = ResourceAmounts()


class Toleration(_Strict):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(None, ge=-(2**63), le=2**63 - 1)  # int64 in Kubernetes

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists must not set a value")
        return self


class Execution(_Strict):
    """Kubernetes placement and pod fields; each reaches the pod only if the operator allows it."""

    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    service_account: str | None = None
    priority_class_name: str | None = None
    affinity: dict[str, Any] | None = None
    topology_spread_constraints: list[dict[str, Any]] | None = None
    termination_grace_period_seconds: int | None = Field(None, ge=0, le=2**63 - 1)
    resource_claims: list[dict[str, Any]] | None = None

    def declared(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


class TaskFields(_Strict):
    """Every field a task may set; ``defaults`` uses the same shape."""

    command: Command | None = None
    image: OneLine | None = None
    env: EnvVars | None = None
    depends_on: list[str] | None = None
    trigger_rule: TriggerRuleField | None = None
    retries: int | None = Field(None, ge=0, le=100)
    retry_delay: Duration | None = None
    timeout: Duration | None = None
    pool: OneLine | None = None
    pool_slots: Count | None = None
    priority: Priority | None = None
    secrets: list[SecretName] | None = None
    resources: Resources | None = None
    execution: Execution | None = None
    notify: list[NotifyRule] | None = None
    max_map_items: int | None = Field(None, ge=1, le=MAX_MAP_ITEMS)


class TaskSpec(_Strict):
    """A task after defaults are applied: what the scheduler and executors read."""

    task_id: Annotated[str, Field(pattern=TASK_ID_PATTERN)]
    command: Command
    image: OneLine | None = None
    env: EnvVars = Field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    trigger_rule: TriggerRuleField = TriggerRule.ALL_SUCCESS
    retries: int = Field(0, ge=0, le=100)
    retry_delay: Duration = 0.0
    timeout: Duration | None = None
    pool: OneLine = DEFAULT_POOL
    pool_slots: Count = 1
    priority: Priority = 0
    secrets: tuple[SecretName, ...] = ()
    resources: Resources = Resources()
    execution: Execution = Execution()
    notify: tuple[NotifyRule, ...] = ()
    # One task instance per item (leoflow/domain/mapping.py); not a default, per task.
    map_over: MapOver | None = None
    max_map_items: int = Field(DEFAULT_MAX_MAP_ITEMS, ge=1, le=MAX_MAP_ITEMS)
    # Assets (URIs or plain names) the task writes and reads: its success records an
    # event per produced asset, which DAGs scheduled on that asset wait for. Per task
    # only: not a default, since one asset has its own producers.
    produces: AssetUris = ()
    consumes: AssetUris = ()

    @property
    def max_tries(self) -> int:
        return self.retries + 1

    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        return list(self.command)


class PoolDeclaration(_Strict):
    """A pool the DAG needs: created with these slots when no pool of its name exists.

    A pool that exists (from the settings, the API or an earlier DAG) is used as it is:
    a DAG file never resizes, shrinks or redescribes an operator's pool."""

    slots: int = Field(ge=1, le=1_000_000)
    description: OneLine = ""


PoolName = Annotated[str, Field(pattern=POOL_NAME_PATTERN)]


class DagSpec(_Strict):
    dag_id: Annotated[str, Field(pattern=DAG_ID_PATTERN)]
    description: str | None = None
    # A cron expression; ``schedule: {assets: ..., cron: ...}`` in a file is split into
    # this and ``asset_schedule`` (leoflow.domain.assets.condition) as it is read.
    schedule: OneLine | None = None
    asset_schedule: dict[str, Any] | None = None
    timezone: OneLine = "UTC"
    start_date: datetime | None = None
    catchup: bool = False
    max_active_runs: int = Field(1, ge=1, le=MAX_ACTIVE_LIMIT)
    max_active_tasks: int = Field(16, ge=1, le=MAX_ACTIVE_LIMIT)
    # From the logical date (or, without one, the trigger time): a run not done by
    # then is reported (deadline_missed) and goes on. A run running longer than
    # run_timeout fails, its tasks stopped.
    deadline: Duration | None = None
    run_timeout: Duration | None = None
    tags: tuple[OneLine, ...] = ()
    notify: tuple[NotifyRule, ...] = ()
    tasks: dict[str, TaskSpec]
    pools: dict[PoolName, PoolDeclaration] = Field(default_factory=dict)
    # Kept as written: the tasks it became are in ``tasks`` already (leoflow/domain/dbt.py).
    dbt: DbtSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _split_schedule(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("schedule"), dict):
            if "asset_schedule" in data:
                raise ValueError("asset_schedule is set from schedule.assets, not on its own")
            cron, condition = parse_schedule(data["schedule"])
            data = {**data, "schedule": cron, "asset_schedule": condition}
        return data

    @field_validator("asset_schedule")
    @classmethod
    def _check_assets(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else parse_condition(value)

    def schedule_assets(self) -> list[str]:
        """The assets the DAG's schedule names (none without an asset schedule)."""
        return [] if self.asset_schedule is None else condition_uris(self.asset_schedule)

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CronSchedule.parse(value)  # the zone is checked on its own field
            except CronError as exc:
                raise ValueError(f"{exc} (in {value!r})") from exc
        return value

    @field_validator("start_date")
    @classmethod
    def _check_start_date(cls, value: datetime | None) -> datetime | None:
        if value is not None:
            try:
                check_moment(value)
            except OutOfRange as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        try:
            check_timezone(value)
        except CronError as exc:
            raise ValueError(str(exc)) from exc
        return value

    def cron(self) -> CronSchedule | None:
        return CronSchedule.parse(self.schedule, self.timezone) if self.schedule else None

    def downstream(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {task_id: [] for task_id in self.tasks}
        for task in self.tasks.values():
            for upstream in task.depends_on:
                out[upstream].append(task.task_id)
        return out

    def leaves(self) -> tuple[str, ...]:
        """Tasks no other task depends on: they decide the run's outcome."""
        return tuple(sorted(t for t, downs in self.downstream().items() if not downs))

    def used_pools(self) -> set[str]:
        return {task.pool for task in self.tasks.values()}

    @field_validator("pools")
    @classmethod
    def _check_pools(cls, value: dict[str, PoolDeclaration]) -> dict[str, PoolDeclaration]:
        if DEFAULT_POOL in value:
            raise ValueError(
                f"{DEFAULT_POOL} always exists; its size is the default_pool_slots setting"
            )
        return value
