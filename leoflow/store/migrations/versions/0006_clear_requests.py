"""Clear requests: clearing a task of a run that is still running.

The API cannot change a running run's task instances itself (the leading scheduler
holds them in memory), so it records the request here; the scheduler applies it and
stamps ``applied_at`` and ``outcome``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "clear_requests",
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
        sa.Column("requested_at", sa.Double, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("applied_at", sa.Double, nullable=True),
        sa.Column("outcome", sa.Text, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_clear_requests_applied_at", "clear_requests", ["applied_at"])


def downgrade() -> None:
    op.drop_index("ix_clear_requests_applied_at", table_name="clear_requests")
    op.drop_table("clear_requests")
