"""The ``store`` fixture: every store test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leoflow.store import Store


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database's URL, one per backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'leoflow.db'}"
    else:
        server = request.getfixturevalue("postgres_server")
        url = await server.create_database()
        try:
            yield url
        finally:
            await server.drop_database(url)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """An open, migrated store on a fresh database."""
    opened = await Store.open(store_url)
    try:
        yield opened
    finally:
        await opened.close()
