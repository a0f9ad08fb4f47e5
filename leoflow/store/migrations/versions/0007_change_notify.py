"""Change notifications (PostgreSQL): every committed write to a table the
scheduler's poll follows sends ``NOTIFY leoflow_changes``.

The poll (``leoflow.store.change_listener``) listens on that channel and reads the
store only after a notification, so an idle poll reads nothing. The triggers
cover what the API, the DAG loader and the scheduler write for the poll: DAGs,
pools, runs, backfills and their points, clear requests. Task instances, log
chunks, tickets, the lease and the epoch are left out on purpose: they change at
the rate tasks run and heartbeat, and a notifying commit takes PostgreSQL's
notification queue lock; the poll reads the live tries' rows itself.

SQLite has no NOTIFY (its poll reads ``PRAGMA data_version``): there this revision
changes nothing.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CHANNEL = "leoflow_changes"
FUNCTION = "leoflow_notify_change"
TABLES = ("dags", "pools", "dag_runs", "backfills", "backfill_points", "clear_requests")


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if not _postgres():
        return
    # Row-level: a statement that matches no row (an upsert that changed nothing)
    # notifies no one. PostgreSQL folds one transaction's equal notifications
    # into one, delivered when (and only if) it commits.
    op.execute(
        f"""
        CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
            RETURN NULL;
        END
        $$
        """
    )
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_notify_change AFTER INSERT OR UPDATE OR DELETE "
            f"ON {table} FOR EACH ROW EXECUTE FUNCTION {FUNCTION}()"
        )


def downgrade() -> None:
    if not _postgres():
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_notify_change ON {table}")
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
