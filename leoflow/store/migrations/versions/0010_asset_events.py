"""Assets: which DAGs produce, consume and are scheduled on each asset, the events
recorded on them, each asset-scheduled DAG's consumption cursor, and which events
triggered a run (see leoflow/store/assets.py). On PostgreSQL, events and cursors
notify the scheduler's poll like the tables of 0007.

Revision ID: asset_events
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "asset_events"
down_revision = "0009_mark_requests"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
NOTIFIED = ("asset_events", "asset_triggers")


def upgrade() -> None:
    op.create_table(
        "asset_refs",
        sa.Column("dag_id", sa.Text, primary_key=True),
        sa.Column("uri", sa.Text, primary_key=True),
        sa.Column("role", sa.Text, primary_key=True),
        sa.Column("task_id", sa.Text, primary_key=True),
        sa.Index("ix_asset_refs_uri", "uri"),
    )
    op.create_table(
        "asset_events",
        sa.Column("pk", PK, primary_key=True, autoincrement=True),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
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
    op.create_table(
        "asset_triggers",
        sa.Column("dag_id", sa.Text, primary_key=True),
        sa.Column("floor_event_pk", sa.BigInteger, nullable=False),
        sa.Column("cursors", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "asset_run_events",
        sa.Column(
            "run_pk",
            PK,
            sa.ForeignKey("dag_runs.pk", ondelete="CASCADE", name="fk_asset_run_events_run_pk"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("event_pk", sa.BigInteger, primary_key=True, autoincrement=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        for table in NOTIFIED:  # the function is 0007's
            op.execute(
                f"CREATE TRIGGER {table}_notify_change AFTER INSERT OR UPDATE OR DELETE "
                f"ON {table} FOR EACH ROW EXECUTE FUNCTION leoflow_notify_change()"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in NOTIFIED:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_notify_change ON {table}")
    for table in ("asset_run_events", "asset_triggers", "asset_events", "asset_refs"):
        op.drop_table(table)
