"""A task instance's output, and the item a mapped task instance runs for.

``output``: the JSON text (at most 64 KB) its last successful try wrote to
``$LEOFLOW_OUTPUT``; its downstream tasks get it as inputs. ``map_item``: for one
item of a mapped task (``task[3]``), that item as JSON text, so a restarted
scheduler rebuilds the run's items without reading the list's source again.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_instances") as batch:
        batch.add_column(sa.Column("output", sa.Text, nullable=True))
        batch.add_column(sa.Column("map_item", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task_instances") as batch:
        batch.drop_column("map_item")
        batch.drop_column("output")
