"""Where a stored DAG came from, read off its ``fileloc``: a file of a folder (its
path), the API (``api:DAG``) or only ``leoflow run FILE`` (``run:`` + the file)."""

from __future__ import annotations

# `dags list` hides ad-hoc DAGs unless asked (--all); a folder or the API takes one over.
ADHOC_PREFIX = "run:"


def is_adhoc(fileloc: str) -> bool:
    """Registered only by ``leoflow run FILE``, not by a DAG folder or the API."""
    return fileloc.startswith(ADHOC_PREFIX)
