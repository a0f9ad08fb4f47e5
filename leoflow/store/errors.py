"""What the store raises, beyond the domain's IllegalTransition."""

from __future__ import annotations


class StoreError(Exception):
    """Base class of the store's own errors."""


class StaleEpoch(StoreError):
    """A fenced write carried an epoch that is no longer the current one: a newer
    leader has taken office, and nothing was written."""

    def __init__(self, expected: int, current: int) -> None:
        super().__init__(f"stale scheduler epoch {expected}: the current epoch is {current}")
        self.expected = expected
        self.current = current


class RunExists(StoreError):
    """A run with this (dag_id, run_id) already exists."""

    def __init__(self, dag_id: str, run_id: str) -> None:
        super().__init__(f"run {run_id!r} of DAG {dag_id!r} already exists")
        self.dag_id = dag_id
        self.run_id = run_id


class SchemaNotCurrent(StoreError):
    """The database is not at the schema this code expects, and migrating was not
    asked for (run ``leoflow db upgrade``)."""


class StoreUnavailable(StoreError):
    """The database did not answer (down, restarting, or locked) for the store's whole
    retry window; nothing was written."""

    # Duck-typed by the agent endpoint (which does not import the store): answer
    # UNAVAILABLE, which the agent retries, rather than INTERNAL.
    unavailable = True
