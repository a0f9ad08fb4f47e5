"""Alembic environment for Leoflow's store.

``Store.open`` runs the migrations on a connection it already holds (inside a
transaction that also holds the migration lock) and passes it in
``config.attributes["connection"]``. Run by the ``alembic`` command instead, the URL
comes from ``-x url=...``, the ini's ``sqlalchemy.url`` or ``LEOFLOW_DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from leoflow.store.schema import VERSION_TABLE, metadata

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url") or os.environ.get("LEOFLOW_DATABASE_URL")
    if not url:
        raise SystemExit("no database URL: pass -x url=... or set LEOFLOW_DATABASE_URL")
    return url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_async_engine(url: str) -> None:
    from leoflow.store.engine import create_postgres_engine, normalize_url

    engine = create_postgres_engine(normalize_url(url))
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


def _run_with_engine(url: str) -> None:
    from leoflow.store.engine import create_sqlite_engine, normalize_url

    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        asyncio.run(_run_with_async_engine(url))
        return
    engine = create_sqlite_engine(parsed)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=_url(), target_metadata=metadata, version_table=VERSION_TABLE, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
    else:
        _run_with_engine(_url())
