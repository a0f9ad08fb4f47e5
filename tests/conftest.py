"""Suite-wide fixtures. Each section belongs to the layer that needs it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support.postgres import PgServer, start_postgres

# --- PostgreSQL (store): one throw-away server per session, a fresh database per test.


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """The session's PostgreSQL (embedded, or LEOFLOW_TEST_DATABASE_URL's server)."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def postgres_url(postgres_server: PgServer) -> AsyncIterator[str]:
    """The URL (postgresql+asyncpg://) of a new, empty database, dropped afterwards."""
    url = await postgres_server.create_database()
    try:
        yield url
    finally:
        await postgres_server.drop_database(url)
