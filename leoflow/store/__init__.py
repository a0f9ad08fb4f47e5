"""The state store: runs, task instances, DAGs, pools, tickets and logs, in SQLite
(Lite) or PostgreSQL (Pro).

``store.Store`` is the one class callers use; it is assembled from one record
module per record type (``dags``, ``runs``, ``tasks``, ``pools``, ``tickets``,
``logs``, ``office``, ``retention``) over ``base.StoreBase`` (the runner and the
fence). An adapter and the only package that talks SQL (SQLAlchemy Core, aiosqlite,
asyncpg, Alembic): it imports only the domain below it, never the scheduler, the
API, the executors or Kubernetes.
"""

from leoflow.store.errors import (
    RunExists,
    SchemaNotCurrent,
    StaleEpoch,
    StoreError,
    StoreUnavailable,
)
from leoflow.store.rows import (
    DagRow,
    PoolRow,
    RunChange,
    RunRow,
    TaskChange,
    TaskInstanceRow,
    TaskSeed,
    TicketUse,
)
from leoflow.store.store import Store

__all__ = [
    "DagRow",
    "PoolRow",
    "RunChange",
    "RunExists",
    "RunRow",
    "SchemaNotCurrent",
    "StaleEpoch",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "TaskChange",
    "TaskInstanceRow",
    "TaskSeed",
    "TicketUse",
]
