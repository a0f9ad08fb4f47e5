"""Backfills and run deadlines.

``backfills`` holds one row per backfill (its DAG, state, range, max_active_runs,
who asked). ``backfill_points`` holds one row per cron point of the range, with
the run made for it once the scheduler has made it (``run_pk``, not a foreign
key: pruning runs keeps the backfill's history). ``dag_runs.deadline_missed_at``:
when the run was found past its DAG's ``deadline``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "backfills",
        sa.Column("pk", PK, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("range_start", sa.Double, nullable=False),
        sa.Column("range_end", sa.Double, nullable=False),
        sa.Column("reprocess_failed", sa.Boolean, nullable=False),
        sa.Column("max_active_runs", sa.Integer, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("ended_at", sa.Double, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_backfills_state", "backfills", ["state"])
    op.create_table(
        "backfill_points",
        sa.Column(
            "backfill_pk",
            PK,
            sa.ForeignKey(
                "backfills.pk", ondelete="CASCADE", name="fk_backfill_points_backfill_pk"
            ),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("logical_date", sa.Double, primary_key=True, autoincrement=False),
        sa.Column("run_pk", sa.BigInteger, nullable=True),
    )
    op.add_column("dag_runs", sa.Column("deadline_missed_at", sa.Double, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dag_runs") as table:
        table.drop_column("deadline_missed_at")
    op.drop_table("backfill_points")
    op.drop_index("ix_backfills_state", table_name="backfills")
    op.drop_table("backfills")
