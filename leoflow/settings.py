"""Leoflow's one settings model.

Every setting comes from a file (``--config``), from the environment as
``LEOFLOW_<NAME>``, or from its default, in that order of precedence reversed:
environment beats file beats default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from leoflow.domain.timebounds import INT32_MAX, MAX_DURATION_SECONDS
from leoflow.domain.warm_pods import ReusePods
from leoflow.settings_env import NoDecode, environment_values
from leoflow.settings_lineage import LineageSettings

PASSTHROUGH_FIELDS = (
    "tolerations",
    "node_selector",
    "service_account",
    "priority_class_name",
    "affinity",
    "topology_spread_constraints",
    "ephemeral_storage",
    "termination_grace_period_seconds",
    "resource_claims",
)


class SettingsError(Exception):
    """A setting is missing or malformed; the message names it."""


class TaskPodSecurity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    run_as_non_root: bool = True
    read_only_root_filesystem: bool = False
    fs_group: int = 65532


class LeaderElection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    lease_name: str = "leoflow-scheduler"
    lease_duration: float = Field(15.0, gt=0)
    renew_deadline: float = Field(10.0, gt=0)
    retry_period: float = Field(2.0, gt=0)


def _default_home() -> Path:
    return Path(os.path.expanduser("~")) / ".leoflow"


class Settings(BaseModel):
    """All of Leoflow's configuration, validated once at start (``load_settings``)."""

    # Built when first validated: `leoflow run` validates it once, early.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)

    # --- common
    home: Path = Field(default_factory=_default_home)
    database_url: str | None = None
    dags_folder: Path | None = None
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"

    # --- admission
    parallelism: int = Field(32, gt=0, le=INT32_MAX)
    default_pool_slots: int = Field(128, gt=0, le=INT32_MAX)
    pools: dict[str, Annotated[int, Field(ge=0, le=INT32_MAX)]] = Field(default_factory=dict)

    # --- scheduler
    executor: Literal["subprocess", "agent", "kubernetes", "docker"] = "agent"
    # Lite run as root: run every task as this user (name or uid) instead of root.
    task_user: str | None = None
    # Lite run as root: each running task its own uid from this range (START-END).
    task_uids: str | None = None
    scheduler_poll_interval: float = Field(1.0, gt=0, le=MAX_DURATION_SECONDS)
    heartbeat_interval: float = Field(5.0, gt=0, le=MAX_DURATION_SECONDS)
    heartbeat_timeout: float = Field(60.0, gt=0, le=MAX_DURATION_SECONDS)
    catchup: bool = False
    # Catchup keeps at most this many runs of one DAG queued; the rest follow as they start.
    max_catchup_runs: int = Field(100, gt=0, le=1_000_000)
    # Finished runs older than this (a duration: 30d, 12h) are deleted with their task
    # instances, logs and tickets by the scheduler, in small batches; unset (the
    # default, as in Airflow and Argo) keeps everything. See `leoflow db prune`.
    retention: float | None = None

    # --- agent endpoint
    agent_listen: str = "127.0.0.1:0"
    agent_endpoint: str | None = None
    token_signing_key: str | None = None
    ticket_ttl: float = Field(600.0, gt=0, le=MAX_DURATION_SECONDS)
    secrets_dir: Path | None = None
    # TLS on the agent endpoint: the server's certificate and key (PEM files, re-read
    # when they change); unset, the endpoint is plaintext (Lite on loopback).
    agent_tls_cert_file: Path | None = None
    agent_tls_key_file: Path | None = None
    # The CA bundle this process's local agents verify the endpoint against (agent executor).
    agent_tls_ca_file: Path | None = None
    # Task pods get the CA bundle (key ca.crt) from this ConfigMap or Secret in the task
    # namespace, mounted read-only at /etc/leoflow/agent-ca.
    agent_tls_ca_configmap: str | None = None
    agent_tls_ca_secret: str | None = None
    # Bounds on the endpoint's connections (leoflow/scheduler/agent_bounds.py): how many
    # at once (at most half the process's descriptors), how long one may take to speak
    # HTTP/2, stay without a call, or leave a keepalive ping unanswered (seconds).
    agent_max_connections: int = Field(4096, gt=0, le=1_000_000)
    agent_handshake_timeout: float = Field(10.0, gt=0, le=3600)
    agent_idle_timeout: float = Field(300.0, gt=0, le=7 * 86400)
    agent_keepalive_interval: float = Field(60.0, gt=0, le=86400)
    agent_keepalive_timeout: float = Field(20.0, gt=0, le=3600)
    agent_max_streams_per_connection: int = Field(100, gt=0, le=10_000)

    # --- http api
    api_listen: str = "127.0.0.1:8080"
    api_tokens_file: Path | None = None
    # Lite without api_tokens_file: serve the API on loopback without any token (every
    # local user may drive it), instead of requiring the owner token it writes to
    # $LEOFLOW_HOME/api-token. For a host with one user only; Lite warns at start.
    api_open_on_loopback: bool = False
    metrics_listen: str | None = None
    # Host names (besides 127.0.0.1, localhost, [::1]) and origins the API accepts
    # (leoflow/api/guard.py); comma-separated in the environment.
    api_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    api_allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()
    api_body_limit: int = Field(64 * 1024, gt=0)
    api_dag_body_limit: int = Field(1024 * 1024, gt=0)
    api_run_conf_limit: int = Field(32 * 1024, gt=0)
    api_json_max_depth: int = Field(32, gt=0, le=512)
    # What the HTTP server holds (leoflow/api/connections.py): open connections in all
    # and per peer address (a stalled one gives way to a newcomer), and the seconds a
    # request head and a request body may take to arrive (408 after).
    api_max_connections: int = Field(512, gt=0, le=65536)
    api_max_connections_per_peer: int = Field(256, gt=0, le=65536)
    api_head_timeout: float = Field(10.0, gt=0, le=3600)
    api_body_timeout: float = Field(60.0, gt=0, le=3600)
    # The web UI's live streams (leoflow/api/live_streams.py): open at once in all (503
    # past it) and per session (its oldest ends), and pages rendered a second by all.
    ui_max_streams: int = Field(64, gt=0, le=10000)
    ui_max_streams_per_session: int = Field(8, gt=0, le=1000)
    ui_live_renders_per_second: float = Field(20.0, gt=0, le=10000)

    # --- kubernetes
    task_namespace: str = "default"
    release_namespace: str = "leoflow-system"
    task_image: str = "ghcr.io/leoflow/leoflow:0.1.0"
    # Comma-separated in the environment, so not decoded as JSON there.
    image_pull_secrets: Annotated[tuple[str, ...], NoDecode] = ()
    task_pod_security: TaskPodSecurity = Field(default_factory=TaskPodSecurity)
    task_pod_passthrough: Annotated[frozenset[str], NoDecode] = frozenset()
    # Warm task pods for every DAG that does not set ``kubernetes.reuse_pods`` itself
    # (JSON in the environment, e.g. {"max_pods": 4}); unset, a pod per try.
    reuse_pods_default: ReusePods | None = None

    # --- docker executor (each Lite task in a container from the task pod's spec)
    # The engine's Unix socket (unix:///path); unset, $DOCKER_HOST, else /var/run/docker.sock.
    docker_host: str | None = None
    # The network a task's container joins: "host" (its agent dials Lite's endpoint on
    # loopback) or a network name, when agent_endpoint is an address reachable from it.
    docker_network: str = "host"
    # How long a container's wait rides out an engine that does not answer (restarting)
    # before its try is failed as lost.
    docker_outage_window: float = Field(60.0, gt=0)
    kube_qps: float = Field(20.0, gt=0)
    kube_burst: int = Field(40, gt=0)
    pod_gc_age: float = Field(300.0, ge=0)
    # A DAG whose file left the folder keeps its GC anchor (and so its task pods) this
    # long, and as long as a run of it is live; then the anchor is deleted.
    removed_dag_grace: float = Field(600.0, ge=0)
    pod_lost_grace: float = Field(30.0, ge=0)
    pod_pending_timeout: float = Field(600.0, gt=0)
    # How long a pod create (or delete) rides out an apiserver that does not answer
    # (refused, reset, timeout, 429, 5xx) before the try fails; the retries back off
    # exponentially with jitter up to kube_retry_cap seconds apart.
    kube_outage_window: float = Field(600.0, gt=0)
    kube_retry_cap: float = Field(10.0, gt=0)
    # How long a stopping executor waits for the pod deletes it has promised (a pod that
    # could not start, a cancelled try) before it gives up on them.
    kube_stop_timeout: float = Field(10.0, ge=0, le=3600)
    # A watch that brings nothing, not even a bookmark (the apiserver sends one about
    # every 60 s), for this long is dead: restarted, and the pod cache not synced meanwhile.
    kube_watch_silence: float = Field(120.0, gt=0)
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    identity: str | None = None

    # --- OpenLineage events (leoflow/settings_lineage.py); off unless a transport is set
    lineage: LineageSettings = Field(default_factory=LineageSettings)

    @model_validator(mode="after")
    def _check_agent_tls(self) -> Settings:
        if (self.agent_tls_cert_file is None) != (self.agent_tls_key_file is None):
            raise ValueError(
                "agent_tls_cert_file and agent_tls_key_file go together: set both or neither"
            )
        if self.agent_tls_ca_configmap and self.agent_tls_ca_secret:
            raise ValueError("agent_tls_ca_configmap and agent_tls_ca_secret: set one, not both")
        return self

    @field_validator("task_pod_passthrough", mode="before")
    @classmethod
    def _split_passthrough(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple | set | frozenset):
            return value  # not a list: the field's type check says so
        # str(): an item that is not a name (a number, a nested list) is unknown too.
        unknown = sorted({str(item) for item in value} - set(PASSTHROUGH_FIELDS))
        if unknown:
            raise ValueError(
                f"unknown field(s) {unknown}; allowed: {', '.join(PASSTHROUGH_FIELDS)}"
            )
        return frozenset(value)

    @field_validator("task_user")
    @classmethod
    def _check_task_user(cls, value: str | None) -> str | None:
        if value is None:
            return value
        import pwd

        try:
            entry = pwd.getpwuid(int(value)) if value.isdigit() else pwd.getpwnam(value)
        except (KeyError, OverflowError):
            raise ValueError(f"no user {value!r} on this host") from None
        if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
            raise ValueError(
                f"running tasks as {value!r} needs Lite to run as root (it runs as uid "
                f"{os.geteuid()})"
            )
        return value

    @field_validator("task_uids")
    @classmethod
    def _check_task_uids(cls, value: str | None) -> str | None:
        if value is None:
            return value
        first, sep, last = value.partition("-")
        if not (sep and first.isdigit() and last.isdigit() and 0 < int(first) <= int(last)):
            raise ValueError(f"{value!r} is not START-END, two uids above 0 (e.g. 61184-61439)")
        if int(last) >= 2**32 - 1:
            raise ValueError(f"{value!r}: a uid is below 4294967295")
        if os.geteuid() != 0:
            raise ValueError(
                f"a uid per task needs Lite to run as root (it runs as uid {os.geteuid()})"
            )
        return value

    @model_validator(mode="after")
    def _one_way_to_run_tasks_as_others(self) -> Settings:
        if self.task_uids and self.task_user:
            raise ValueError(
                "task_uids and task_user both say whom tasks run as: set one "
                "(task_uids gives each task its own uid, task_user one for all)"
            )
        return self

    @field_validator("retention", mode="before")
    @classmethod
    def _parse_retention(cls, value: Any) -> Any:
        from leoflow.domain.durations import parse_duration

        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "off")):
            return None
        seconds = parse_duration(value, MAX_DURATION_SECONDS * 10)
        if seconds <= 0:
            raise ValueError("expected a duration > 0 such as 30d, or off")
        return seconds

    @field_validator("image_pull_secrets", mode="before")
    @classmethod
    def _split_secrets(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("api_allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        return _checked_list(
            value,
            lambda entry: _HOST_ENTRY.fullmatch(entry) is not None,
            "host names such as leoflow.example, .example.com, [::1] or name:port "
            "(no scheme or path)",
        )

    @field_validator("api_allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        return _checked_list(
            value,
            _is_origin,
            "origins such as https://leoflow.example or http://localhost:3000 "
            "(scheme://host[:port], no path)",
        )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.home / 'leoflow.db'}"

    @property
    def resolved_secrets_dir(self) -> Path:
        return self.secrets_dir if self.secrets_dir is not None else self.home / "secrets"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"


_HOST_ENTRY = re.compile(r"(\*|\.?[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


def _split_list(value: object) -> object:
    """A comma-separated string (as the environment gives it) or a list, as a tuple."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list):
        return tuple(value)
    return value


def _checked_list(value: object, ok: Callable[[str], bool], expected: str) -> object:
    """``_split_list``, each entry checked: a bad one is an error naming it."""
    value = _split_list(value)
    for entry in value if isinstance(value, tuple) else ():
        if not ok(str(entry)):
            raise ValueError(f"expected {expected}, got {entry!r}")
    return value


def _is_origin(entry: str) -> bool:
    scheme, sep, rest = entry.partition("://")
    return scheme in ("http", "https") and bool(sep and rest) and "/" not in rest


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; raise SettingsError naming the setting that is wrong.

    ``overrides`` beat the environment (``LEOFLOW_<NAME>``, ``LEOFLOW_<NAME>__<FIELD>``
    for a nested one), which beats the file, which beats the defaults."""
    values = _file_values(config_file)
    _deep_update(values, environment_values(Settings, os.environ, SettingsError))
    _deep_update(values, overrides)
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            env = "LEOFLOW_" + name.upper().replace(".", "__")
            problems.append(f"setting {name!r} (env {env}): {err['msg']}")
        source = f" (file {config_file})" if config_file else ""
        raise SettingsError("invalid settings" + source + ":\n  " + "\n  ".join(problems)) from exc


def _file_values(path: Path | None) -> dict[str, Any]:
    """The ``--config`` file's settings; keys are the settings' field names."""
    if path is None:
        return {}
    # Here, not at the top: without --config (the usual case) the settings load
    # sooner, and `leoflow run` starts its agent sooner.
    import yaml

    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SettingsError(f"{path}: cannot read settings file: {exc}") from exc
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path}: expected a mapping of setting names to values")
    return dict(loaded)


def _deep_update(into: dict[Any, Any], update: dict[Any, Any]) -> None:
    """Merge ``update`` into ``into``; mappings merge key by key (a nested env setting
    changes one field of a nested file setting), anything else is replaced."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merged = dict(into[key])
            _deep_update(merged, value)
            into[key] = merged
        else:
            into[key] = value
