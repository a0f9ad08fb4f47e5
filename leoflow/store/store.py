"""The state store: SQLAlchemy Core over SQLite (Lite, tests) or PostgreSQL (Pro).

``Store`` is the sum of one record module per record type, each over the same
runner (``base.StoreBase``): where a method lives is named by what it stores.

Every state change is a compare-and-set (``UPDATE ... WHERE state = :expected``),
so a lost race shows as ``False``, never as a silent overwrite. A scheduler's writes
carry its fencing epoch; the check and the write share one transaction, and the
epoch row is locked FOR SHARE (PostgreSQL) or the whole database is write-locked
(SQLite, ``BEGIN IMMEDIATE``), so ``take_office`` cannot slip in between.
"""

from __future__ import annotations

from leoflow.store.assets import AssetRecords
from leoflow.store.dags import DagRecords
from leoflow.store.logs import LogRecords
from leoflow.store.office import OfficeRecords
from leoflow.store.overview import OverviewRecords
from leoflow.store.pools import PoolRecords
from leoflow.store.retention import RetentionRecords
from leoflow.store.run_tasks import RunTaskRecords
from leoflow.store.runs import RunRecords
from leoflow.store.tasks import TaskInstanceRecords
from leoflow.store.tickets import TicketRecords


class Store(
    OfficeRecords,
    AssetRecords,  # before DagRecords: it adds to a DAG's write
    DagRecords,
    RunRecords,
    TaskInstanceRecords,
    PoolRecords,
    TicketRecords,
    LogRecords,
    RetentionRecords,
    OverviewRecords,
    RunTaskRecords,
):
    """The state store. Open with ``await Store.open(url)``; close when done.

    | records                          | module        |
    |----------------------------------|---------------|
    | fencing epoch, lease row         | ``office``    |
    | DAGs and import errors           | ``dags``      |
    | runs (created with their tasks)  | ``runs``      |
    | task instances, heartbeats       | ``tasks``     |
    | pools                            | ``pools``     |
    | agent tickets                    | ``tickets``   |
    | task logs                        | ``logs``      |
    | retention (``prune``)            | ``retention`` |
    | overview pages' bounded reads    | ``overview``  |
    | a run page's filtered tasks      | ``run_tasks`` |
    | assets, their events and triggers| ``assets``    |
    """
