"""The scheduler lease: leadership without Kubernetes, as a row.

One row (id = 1), written only by compare-and-set on ``version`` (the row's
resourceVersion): who holds it, when they took and last renewed it (their wall
clock, for people reading it), for how long a holder that stops renewing keeps
it, and how many times it changed hands.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    lease = op.create_table(
        "scheduler_lease",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("acquire_time", sa.Double, nullable=False),
        sa.Column("renew_time", sa.Double, nullable=False),
        sa.Column("lease_duration", sa.Double, nullable=False),
        sa.Column("transitions", sa.Integer, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_scheduler_lease_one_row"),
    )
    op.bulk_insert(
        lease,
        [
            {
                "id": 1,
                "holder": "",
                "acquire_time": 0.0,
                "renew_time": 0.0,
                "lease_duration": 0.0,
                "transitions": 0,
                "version": 0,
            }
        ],
    )


def downgrade() -> None:
    op.drop_table("scheduler_lease")
