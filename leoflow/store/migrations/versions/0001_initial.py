"""Initial schema: epoch, dags, import errors, runs, task instances, pools,
tickets, log chunks.

Revision ID: 0001
Revises:
Create Date: 2025-11-30
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    epoch = op.create_table(
        "scheduler_epoch",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_scheduler_epoch_one_row"),
    )
    op.bulk_insert(epoch, [{"id": 1, "epoch": 0, "holder": "", "updated_at": time.time()}])

    op.create_table(
        "dags",
        sa.Column("dag_id", sa.Text, primary_key=True),
        sa.Column("fileloc", sa.Text, nullable=False),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("spec_hash", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "dag_import_errors",
        sa.Column("fileloc", sa.Text, primary_key=True),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )

    op.create_table(
        "dag_runs",
        sa.Column("pk", PK, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.Text, nullable=False),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("run_type", sa.Text, nullable=False),
        sa.Column("logical_date", sa.Double, nullable=True),
        sa.Column("conf", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("started_at", sa.Double, nullable=True),
        sa.Column("ended_at", sa.Double, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.UniqueConstraint("dag_id", "run_id", name="uq_dag_runs_dag_id_run_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_dag_runs_dag_id_pk", "dag_runs", ["dag_id", "pk"])
    op.create_index("ix_dag_runs_state_pk", "dag_runs", ["state", "pk"])
    op.create_index("ix_dag_runs_dag_id_state_pk", "dag_runs", ["dag_id", "state", "pk"])
    op.create_index(
        "ix_dag_runs_last_scheduled", "dag_runs", ["dag_id", "run_type", "logical_date"]
    )

    op.create_table(
        "task_instances",
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
        sa.Column("ready_at", sa.Double, nullable=True),
        sa.Column("queued_at", sa.Double, nullable=True),
        sa.Column("started_at", sa.Double, nullable=True),
        sa.Column("ended_at", sa.Double, nullable=True),
        sa.Column("next_retry_at", sa.Double, nullable=True),
        sa.Column("heartbeat_at", sa.Double, nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("executor_ref", sa.Text, nullable=True),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.UniqueConstraint("run_pk", "task_id", name="uq_task_instances_run_pk_task_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_task_instances_state", "task_instances", ["state"])
    op.create_index("ix_task_instances_dag_id_state", "task_instances", ["dag_id", "state"])

    op.create_table(
        "pools",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "tickets",
        sa.Column("hash", sa.Text, primary_key=True),
        sa.Column("ti_pk", sa.BigInteger, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
        sa.Column("used_at", sa.Double, nullable=True),
    )
    op.create_table(
        "log_chunks",
        sa.Column("ti_pk", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("try_number", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("start", sa.BigInteger, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "log_chunks",
        "tickets",
        "pools",
        "task_instances",
        "dag_runs",
        "dag_import_errors",
        "dags",
        "scheduler_epoch",
    ):
        op.drop_table(table)
