"""The DAG catalogue's record: what is stored for one DAG spec, and the rules for it.

One hash (``spec_hash``) and one parse (``parse_spec``), shared by every writer (the
folder loader, the API, ``leoflow run``) and every reader (the scheduler, the API,
the agent endpoint). Pure: the store keeps the records, the loader reads the files;
the one rule for which load options apply sits beside the loader
(``leoflow.dagfile.loader.load_options``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from leoflow.domain.dag import DagSpec
from leoflow.domain.spec_sharing import read_shared

# Hashed a slice at a time: a 10,000-task spec is 6 MB of JSON, and a whole encoded
# copy of it was one more peak in the RSS of the process that stores it.
_HASH_SLICE = 1 << 20


def spec_hash(spec_json: str) -> str:
    """The identity of a spec's content: equal JSON, equal hash (of its UTF-8)."""
    digest = hashlib.sha256()
    for start in range(0, len(spec_json), _HASH_SLICE):
        digest.update(spec_json[start : start + _HASH_SLICE].encode())
    return digest.hexdigest()


def parse_spec(spec_json: str) -> DagSpec:
    """A stored spec back as a ``DagSpec``; ValueError if it does not load. Its tasks
    share their equal parts (``spec_sharing``): the scheduler holds it for every run."""
    return read_shared(spec_json)


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
