"""Indexes that let the scheduler's poll read the DAG table without its specs.

Every poll reads one aggregate row over the DAGs (count, sum of updated_at, paused
and active counts) and, when it moved, each DAG's id, spec hash and flags. In a
SQLite row those columns sit after the spec JSON, so without an index every poll
walked each spec's overflow pages (4-6 ms with 1,000 idle DAGs); both indexes
cover their query, so it is answered from the index alone.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_dags_poll", "dags", ["updated_at", "paused", "active"])
    op.create_index("ix_dags_versions", "dags", ["dag_id", "spec_hash", "paused", "active"])


def downgrade() -> None:
    op.drop_index("ix_dags_versions", table_name="dags")
    op.drop_index("ix_dags_poll", table_name="dags")
