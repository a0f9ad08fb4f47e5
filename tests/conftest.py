"""Suite-wide fixtures. Each section belongs to the layer that needs it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PgServer, start_postgres

# container_image, dbt_image, docker_host: the engine and images of `make image`.
pytest_plugins = ("tests.support.containers",)

# --- Markers: whole folders of slow tests (real processes end to end, a browser, dbt;
# helm renders). Slow files elsewhere say so with a module-level pytestmark.

SLOW_FOLDERS = tuple(Path(__file__).parent / name for name in ("e2e", "chart"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.path.is_relative_to(folder) for folder in SLOW_FOLDERS):
            item.add_marker(pytest.mark.slow)


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
