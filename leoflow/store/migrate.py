"""Running the Alembic migrations from code, with no alembic.ini.

Imported lazily by ``Store.open`` only when the database is not at the head
revision, so an up-to-date database never pays for importing Alembic.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

SCRIPT_LOCATION = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {SCRIPT_LOCATION}")
    return head


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade on ``connection``; the caller owns (and commits) its transaction."""
    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    command.downgrade(alembic_config(connection), revision)
