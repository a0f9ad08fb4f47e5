"""The DAG catalogue's record: what is stored for one DAG spec, and the rules for it.

One hash (``spec_hash``), one parse (``parse_spec``), one rule for which load
options apply (``load_options``), shared by every writer (the folder loader, the
API, ``leoflow run``) and every reader (the scheduler, the API, the agent
endpoint). Pure: the store keeps the records, the loader reads the files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from leoflow.domain.dag import DagSpec
from leoflow.domain.dbt_section import DbtExpander
from leoflow.domain.loader import LoadOptions


def spec_hash(spec_json: str) -> str:
    """The identity of a spec's content: equal JSON, equal hash."""
    return hashlib.sha256(spec_json.encode()).hexdigest()


def parse_spec(spec_json: str) -> DagSpec:
    """A stored spec back as a ``DagSpec``; ValueError if it does not load."""
    return DagSpec.model_validate_json(spec_json)


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """One DAG as it is written to the store."""

    dag_id: str
    fileloc: str
    spec_json: str
    spec_hash: str
    source: str | None

    @classmethod
    def of(cls, spec: DagSpec, *, fileloc: str, source: str | None) -> CatalogueEntry:
        text = spec.model_dump_json()
        return cls(spec.dag_id, fileloc, text, spec_hash(text), source)


@dataclass(frozen=True, slots=True)
class DagVersion:
    """What the scheduler's poll reads of each DAG: enough to see what changed."""

    dag_id: str
    spec_hash: str
    paused: bool
    active: bool


def load_options(
    executor: str,
    task_pod_passthrough: Collection[str],
    *,
    known_pools: Collection[str] | None = None,
    dbt: DbtExpander | None = None,
) -> LoadOptions:
    """The options a DAG is loaded with: ``passthrough`` (which pod fields a task may
    set) applies only where tasks run as pods, i.e. with the kubernetes executor."""
    return LoadOptions(
        known_pools=known_pools,
        passthrough=task_pod_passthrough if executor == "kubernetes" else None,
        dbt=dbt,
    )
