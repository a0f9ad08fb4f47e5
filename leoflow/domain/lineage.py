"""OpenLineage RunEvents for DAG runs and task tries, as the spec's JSON.

Written here rather than through ``openlineage-python``: its current release pulls in
``httpx2``/``httpcore2`` forks and a ``python-dateutil`` 4 beside the ``httpx`` Leoflow
already has, and its transports are blocking (``requests``), which the scheduler's
loop must never wait on. The events follow spec 2-0-2 and its standard facets; the
tests validate them against the spec's own JSON schema files.

Names, as the OpenLineage naming conventions have them:

- a DAG run is the job ``<dag_id>`` in the configured namespace; a task try is the job
  ``<dag_id>.<task_id>`` with a ``parent`` facet naming its DAG run (and its root);
- run ids are UUIDv5 of the DAG and run id (and task and try): stable, so every event of
  one run or try, from any scheduler replica and across restarts, carries one id;
- an asset URI ``scheme://authority/path`` is the dataset ``path`` in namespace
  ``scheme://authority`` (``duckdb://shop/main.orders``: ``main.orders`` in
  ``duckdb://shop``); ``file:///x`` is ``/x`` in ``file``; a plain name is itself in the
  job namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

EventType = Literal["START", "COMPLETE", "FAIL", "ABORT"]

SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
PRODUCER = "https://github.com/leoflow/leoflow"
FACETS = "https://openlineage.io/spec/facets"
# The facet schema versions these events are written to (spec/facets/*.json).
PARENT_FACET = f"{FACETS}/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
JOB_TYPE_FACET = f"{FACETS}/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
ERROR_FACET = f"{FACETS}/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
SCHEMA_FACET = f"{FACETS}/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
SQL_FACET = f"{FACETS}/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet"
COLUMNS_FACET = f"{FACETS}/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
STATS_FACET = (
    f"{FACETS}/1-0-2/OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet"
)
# uuid5's namespace for Leoflow's run ids (a fixed, random UUID: never change it).
_IDS = uuid.UUID("6f1c2a4e-3d0b-5e7a-9c41-0b8d5a2f7e19")


def run_uuid(dag_id: str, run_id: str) -> str:
    return str(uuid.uuid5(_IDS, f"run\0{dag_id}\0{run_id}"))


def try_uuid(dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
    return str(uuid.uuid5(_IDS, f"try\0{dag_id}\0{run_id}\0{task_id}\0{try_number}"))


def dataset_name(uri: str, default_namespace: str) -> tuple[str, str]:
    """``(namespace, name)`` of the dataset an asset URI names (module docstring)."""
    # By hand, not urllib (the domain does no I/O, nor imports its libraries): the URI
    # is normalised already (leoflow.domain.assets.uri), its fragment dropped.
    scheme, found, rest = uri.partition("://")
    if not found:
        return default_namespace, uri
    authority, slash, path = rest.partition("/")
    path, _, query = path.partition("?")
    if "?" in authority:  # s3://bucket?x=1: the query belongs to the name
        authority, _, query = authority.partition("?")
    if not authority:
        return scheme, slash + path or "/"
    name = path or "/"
    return f"{scheme}://{authority}", f"{name}?{query}" if query else name


@dataclass(frozen=True)
class DatasetFacts:
    """What is known of one dataset beyond its URI (dbt: from the manifest and results)."""

    columns: tuple[tuple[str, str | None, str | None], ...] = ()  # name, type, description
    # output column -> the (uri, column) pairs it is computed from
    column_lineage: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    row_count: int | None = None


@dataclass(frozen=True)
class Subject:
    """One OpenLineage run: a DAG run (``task_id`` None) or a task's try."""

    namespace: str
    dag_id: str
    run_id: str
    task_id: str | None = None
    try_number: int = 0
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    @property
    def job(self) -> str:
        return self.dag_id if self.task_id is None else f"{self.dag_id}.{self.task_id}"

    @property
    def run_uuid(self) -> str:
        if self.task_id is None:
            return run_uuid(self.dag_id, self.run_id)
        return try_uuid(self.dag_id, self.run_id, self.task_id, self.try_number)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _facet(schema: str, **values: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema, **values}


def _dataset(
    uri: str, namespace: str, facts: DatasetFacts | None, *, output: bool
) -> dict[str, Any]:
    ns, name = dataset_name(uri, namespace)
    out: dict[str, Any] = {"namespace": ns, "name": name}
    if facts is None:
        return out
    facets: dict[str, Any] = {}
    if facts.columns:
        fields = [_column(*column) for column in facts.columns]
        facets["schema"] = _facet(SCHEMA_FACET, fields=fields)
    if output and facts.column_lineage:
        facets["columnLineage"] = _facet(COLUMNS_FACET, fields=_lineage(facts, namespace))
    if facets:
        out["facets"] = facets
    if output and facts.row_count is not None:
        stats = _facet(STATS_FACET, rowCount=facts.row_count)
        out["outputFacets"] = {"outputStatistics": stats}
    return out


def _column(name: str, kind: str | None, description: str | None) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name}
    if kind:
        column["type"] = kind
    if description:
        column["description"] = description
    return column


def _lineage(facts: DatasetFacts, namespace: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column, sources in facts.column_lineage.items():
        fields = []
        for uri, source in sources:
            ns, name = dataset_name(uri, namespace)
            fields.append({"namespace": ns, "name": name, "field": source})
        out[column] = {"inputFields": fields}
    return out


def run_event(
    kind: EventType,
    subject: Subject,
    at: float,
    *,
    message: str | None = None,
    sql: str | None = None,
    facts: Mapping[str, DatasetFacts] | None = None,
) -> dict[str, Any]:
    """The RunEvent saying ``subject`` moved to ``kind`` at ``at`` (epoch seconds)."""
    run_facets: dict[str, Any] = {}
    if subject.task_id is not None:
        parent_run = {"runId": run_uuid(subject.dag_id, subject.run_id)}
        parent_job = {"namespace": subject.namespace, "name": subject.dag_id}
        root = {"run": parent_run, "job": parent_job}
        run_facets["parent"] = _facet(PARENT_FACET, run=parent_run, job=parent_job, root=root)
    if kind == "FAIL" and message:
        run_facets["errorMessage"] = _facet(
            ERROR_FACET, message=message[:4000], programmingLanguage="shell"
        )
    job_type = "DAG" if subject.task_id is None else "TASK"
    job_facets: dict[str, Any] = {
        "jobType": _facet(
            JOB_TYPE_FACET, processingType="BATCH", integration="LEOFLOW", jobType=job_type
        )
    }
    if sql:
        job_facets["sql"] = _facet(SQL_FACET, query=sql)
    known = facts or {}
    return {
        "eventType": kind,
        "eventTime": _time(at),
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/RunEvent",
        "run": {"runId": subject.run_uuid, "facets": run_facets},
        "job": {"namespace": subject.namespace, "name": subject.job, "facets": job_facets},
        "inputs": _datasets(subject.inputs, subject.namespace, known, output=False),
        "outputs": _datasets(subject.outputs, subject.namespace, known, output=True),
    }


def _datasets(
    uris: Iterable[str], namespace: str, facts: Mapping[str, DatasetFacts], *, output: bool
) -> list[dict[str, Any]]:
    return [_dataset(uri, namespace, facts.get(uri), output=output) for uri in uris]
