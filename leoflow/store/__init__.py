"""The state store: runs, task instances, DAGs, pools, tickets and logs, in SQLite
(Lite) or PostgreSQL (Pro).

The only package that talks SQL (SQLAlchemy Core, aiosqlite, asyncpg, Alembic). Imports
the domain only: never the scheduler, the API, the executors or ``kubernetes_asyncio``.
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
