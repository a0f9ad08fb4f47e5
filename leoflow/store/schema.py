"""The tables, as SQLAlchemy Core metadata.

The migrations in ``migrations/versions`` create exactly this; a test compares the
two. ``HEAD_REVISION`` lets ``Store.open`` see that a database is current without
importing Alembic.
"""

from __future__ import annotations

import sqlalchemy as sa

HEAD_REVISION = "asset_events"
VERSION_TABLE = "alembic_version"

# SQLite wants INTEGER PRIMARY KEY (a rowid alias); PostgreSQL gets BIGSERIAL.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Time = sa.Double

metadata = sa.MetaData()

scheduler_epoch = sa.Table(
    "scheduler_epoch",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    sa.CheckConstraint("id = 1", name="ck_scheduler_epoch_one_row"),
)

# Leadership without Kubernetes (migration 0002); see leoflow/store/leader.py.
scheduler_lease = sa.Table(
    "scheduler_lease",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("acquire_time", Time, nullable=False),
    sa.Column("renew_time", Time, nullable=False),
    sa.Column("lease_duration", Time, nullable=False),
    sa.Column("transitions", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.CheckConstraint("id = 1", name="ck_scheduler_lease_one_row"),
)

dags = sa.Table(
    "dags",
    metadata,
    sa.Column("dag_id", sa.Text, primary_key=True),
    sa.Column("fileloc", sa.Text, nullable=False),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("spec_hash", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=True),
    sa.Column("paused", sa.Boolean, nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    # Cover the scheduler's poll (migration 0004): it never reads past these columns.
    sa.Index("ix_dags_poll", "updated_at", "paused", "active"),
    sa.Index("ix_dags_versions", "dag_id", "spec_hash", "paused", "active"),
)

dag_import_errors = sa.Table(
    "dag_import_errors",
    metadata,
    sa.Column("fileloc", sa.Text, primary_key=True),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
)

dag_runs = sa.Table(
    "dag_runs",
    metadata,
    sa.Column("pk", PK, primary_key=True, autoincrement=True),
    sa.Column("dag_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("run_type", sa.Text, nullable=False),
    sa.Column("logical_date", Time, nullable=True),
    sa.Column("conf", sa.Text, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("ended_at", Time, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    # When the run was found past its DAG's ``deadline`` (migration 0003).
    sa.Column("deadline_missed_at", Time, nullable=True),
    sa.UniqueConstraint("dag_id", "run_id", name="uq_dag_runs_dag_id_run_id"),
    # Keyset pagination newest-first, overall / per DAG / per state / both.
    sa.Index("ix_dag_runs_dag_id_pk", "dag_id", "pk"),
    sa.Index("ix_dag_runs_state_pk", "state", "pk"),
    sa.Index("ix_dag_runs_dag_id_state_pk", "dag_id", "state", "pk"),
    sa.Index("ix_dag_runs_last_scheduled", "dag_id", "run_type", "logical_date"),
    sqlite_autoincrement=True,
)

task_instances = sa.Table(
    "task_instances",
    metadata,
    sa.Column("pk", PK, primary_key=True, autoincrement=True),
    sa.Column(
        "run_pk",
        PK,
        sa.ForeignKey("dag_runs.pk", ondelete="CASCADE", name="fk_task_instances_run_pk"),
        nullable=False,
    ),
    sa.Column("dag_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("task_id", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("try_number", sa.Integer, nullable=False),
    sa.Column("max_tries", sa.Integer, nullable=False),
    sa.Column("pool", sa.Text, nullable=False),
    sa.Column("pool_slots", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("ready_at", Time, nullable=True),
    sa.Column("queued_at", Time, nullable=True),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("ended_at", Time, nullable=True),
    sa.Column("next_retry_at", Time, nullable=True),
    sa.Column("heartbeat_at", Time, nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("executor_ref", sa.Text, nullable=True),
    sa.Column("updated_at", Time, nullable=False),
    # Migration 0005: the last successful try's output (JSON text, at most 64 KB) and,
    # for one item of a mapped task, that item (JSON text).
    sa.Column("output", sa.Text, nullable=True),
    sa.Column("map_item", sa.Text, nullable=True),
    sa.UniqueConstraint("run_pk", "task_id", name="uq_task_instances_run_pk_task_id"),
    sa.Index("ix_task_instances_state", "state"),
    sa.Index("ix_task_instances_dag_id_state", "dag_id", "state"),
    sqlite_autoincrement=True,
)

# Migration 0008: each try of a task instance but its latest, as it stood when the next
# try began or a clear reset it (the latest try is the task instance row itself). Written
# only then, so a task that is never retried nor cleared costs no row.
task_tries = sa.Table(
    "task_tries",
    metadata,
    sa.Column(
        "ti_pk",
        PK,
        sa.ForeignKey("task_instances.pk", ondelete="CASCADE", name="fk_task_tries_ti_pk"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column("try_number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("queued_at", Time, nullable=True),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("ended_at", Time, nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("executor_ref", sa.Text, nullable=True),
)

pools = sa.Table(
    "pools",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("slots", sa.Integer, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
)

tickets = sa.Table(
    "tickets",
    metadata,
    sa.Column("hash", sa.Text, primary_key=True),
    sa.Column("ti_pk", sa.BigInteger, nullable=False),
    sa.Column("try_number", sa.Integer, nullable=False),
    sa.Column("expires_at", Time, nullable=False),
    sa.Column("used_at", Time, nullable=True),
)

log_chunks = sa.Table(
    "log_chunks",
    metadata,
    sa.Column("ti_pk", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("try_number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    # Byte offset of the chunk's first byte in the whole log, and its length:
    # a byte range is read without summing the chunks before it.
    sa.Column("start", sa.BigInteger, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)

# Backfills (migration 0003): one row per backfill, one per cron point it covers.
# ``run_pk`` is set when the point's run is created (the scheduler creates them
# as room under the backfill's max_active_runs appears); it is not a foreign key,
# so pruning old runs leaves the backfill's history readable.
backfills = sa.Table(
    "backfills",
    metadata,
    sa.Column("pk", PK, primary_key=True, autoincrement=True),
    sa.Column("dag_id", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("range_start", Time, nullable=False),
    sa.Column("range_end", Time, nullable=False),
    sa.Column("reprocess_failed", sa.Boolean, nullable=False),
    sa.Column("max_active_runs", sa.Integer, nullable=False),
    sa.Column("created_by", sa.Text, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("ended_at", Time, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    sa.Index("ix_backfills_state", "state"),
    sqlite_autoincrement=True,
)

backfill_points = sa.Table(
    "backfill_points",
    metadata,
    sa.Column(
        "backfill_pk",
        PK,
        sa.ForeignKey("backfills.pk", ondelete="CASCADE", name="fk_backfill_points_backfill_pk"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column("logical_date", Time, primary_key=True, autoincrement=False),
    sa.Column("run_pk", sa.BigInteger, nullable=True),
)

# Clear requests (migration 0006): the API records "clear this task (and what is
# below it)" for a run the scheduler is driving; the leading scheduler applies it
# to its book and the store together, then stamps ``applied_at`` and ``outcome``.
clear_requests = sa.Table(
    "clear_requests",
    metadata,
    sa.Column("pk", PK, primary_key=True, autoincrement=True),
    sa.Column(
        "run_pk",
        PK,
        sa.ForeignKey("dag_runs.pk", ondelete="CASCADE", name="fk_clear_requests_run_pk"),
        nullable=False,
    ),
    sa.Column("task_id", sa.Text, nullable=False),
    sa.Column("downstream", sa.Boolean, nullable=False),
    sa.Column("requested_by", sa.Text, nullable=False),
    sa.Column("requested_at", Time, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("applied_at", Time, nullable=True),
    sa.Column("outcome", sa.Text, nullable=True),
    # Migration 0009_mark_requests: what the request does (``clear``, ``success``,
    # ``failed``, ``clear_failed``) and whether a mark reaches the task's ancestors.
    sa.Column("action", sa.Text, nullable=False, server_default="clear"),
    sa.Column("upstream", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Index("ix_clear_requests_applied_at", "applied_at"),
    sqlite_autoincrement=True,
)

# Assets (migration asset_events; leoflow/store/assets.py). Which DAG's task produces or
# consumes each asset, or which DAG is scheduled on it (role "schedule", task_id ""):
# rewritten with the DAG's row.
asset_refs = sa.Table(
    "asset_refs",
    metadata,
    sa.Column("dag_id", sa.Text, primary_key=True),
    sa.Column("uri", sa.Text, primary_key=True),
    sa.Column("role", sa.Text, primary_key=True),
    sa.Column("task_id", sa.Text, primary_key=True),
    sa.Index("ix_asset_refs_uri", "uri"),
)

# One row per event: a producing task's success (one per asset, per try) or an external
# producer's post (``idempotency_key`` makes a resent post one event).
asset_events = sa.Table(
    "asset_events",
    metadata,
    sa.Column("pk", PK, primary_key=True, autoincrement=True),
    sa.Column("uri", sa.Text, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("dag_id", sa.Text, nullable=True),
    sa.Column("run_id", sa.Text, nullable=True),
    sa.Column("task_id", sa.Text, nullable=True),
    sa.Column("try_number", sa.Integer, nullable=True),
    sa.Column("ti_pk", sa.BigInteger, nullable=True),
    sa.Column("extra", sa.Text, nullable=True),
    sa.Column("idempotency_key", sa.Text, nullable=True),
    sa.Column("created_by", sa.Text, nullable=True),
    sa.UniqueConstraint("idempotency_key", name="uq_asset_events_idempotency_key"),
    sa.UniqueConstraint("ti_pk", "try_number", "uri", name="uq_asset_events_try_uri"),
    sa.Index("ix_asset_events_uri_pk", "uri", "pk"),
    sqlite_autoincrement=True,
)

# Per asset-scheduled DAG: the last event of each asset its runs consumed (``cursors``,
# JSON {uri: event pk}; ``floor_event_pk`` for an asset not in it: the events before the
# DAG was scheduled on assets never count), compare-and-set on ``version`` in the
# transaction that creates the run.
asset_triggers = sa.Table(
    "asset_triggers",
    metadata,
    sa.Column("dag_id", sa.Text, primary_key=True),
    sa.Column("floor_event_pk", sa.BigInteger, nullable=False),
    sa.Column("cursors", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)

# The events that triggered an asset-triggered run (at most TRIGGER_EVENTS_KEPT per asset).
asset_run_events = sa.Table(
    "asset_run_events",
    metadata,
    sa.Column(
        "run_pk",
        PK,
        sa.ForeignKey("dag_runs.pk", ondelete="CASCADE", name="fk_asset_run_events_run_pk"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column("event_pk", sa.BigInteger, primary_key=True, autoincrement=False),
)
