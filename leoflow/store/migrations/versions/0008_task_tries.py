"""Task tries: every try of a task instance but its latest, kept when the next try
begins or a clear resets the row, so each try's start, end, exit code, reason and
where it ran stay readable (the UI's ``?try=N``, ``GET .../tries``). Existing rows
read as one try: nothing to copy.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "task_tries",
        sa.Column(
            "ti_pk",
            PK,
            sa.ForeignKey("task_instances.pk", ondelete="CASCADE", name="fk_task_tries_ti_pk"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("try_number", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("queued_at", sa.Double, nullable=True),
        sa.Column("started_at", sa.Double, nullable=True),
        sa.Column("ended_at", sa.Double, nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("executor_ref", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("task_tries")
