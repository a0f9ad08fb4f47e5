"""Mark requests: a clear request may also mark tasks success or failed, or clear a
run's failed tasks, so a running run's marks reach its scheduler the way its clears do.

``action``: ``clear`` (every row before this revision), ``success``, ``failed`` or
``clear_failed`` (``task_id`` empty: the run's failed tasks as the scheduler finds
them). ``upstream``: the marked task's ancestors are marked too.

Revision ID: 0009_mark_requests
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_mark_requests"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("clear_requests") as batch:
        batch.add_column(sa.Column("action", sa.Text, nullable=False, server_default="clear"))
        batch.add_column(
            sa.Column("upstream", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("clear_requests") as batch:
        batch.drop_column("upstream")
        batch.drop_column("action")
