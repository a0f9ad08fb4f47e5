"""Fixtures for the API: a store (SQLite; PostgreSQL where a test asks), the app
with three tokens, and an httpx client over ASGI."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from leoflow.api.app import create_app
from leoflow.api.auth import Auth, Role
from leoflow.dagfile.loader import parse_dag
from leoflow.settings import Settings
from leoflow.store import Store

TOKENS = {"viewer": "tok-viewer-1", "operator": "tok-operator-2", "admin": "tok-admin-3"}

DAG_YAML = """\
dag_id: etl
max_active_runs: 2
max_active_tasks: 4
tasks:
  extract:
    command: echo extract
  transform:
    depends_on: [extract]
    command: echo transform
    pool: warehouse
    retries: 2
    retry_delay: 30s
  load:
    depends_on: [transform]
    command: echo load
"""


def auth_header(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


def make_auth() -> Auth:
    return Auth.from_hashes(
        [
            (name, Role[name.upper()], hashlib.sha256(token.encode()).hexdigest())
            for name, token in TOKENS.items()
        ]
    )


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "home": tmp_path,
        "parallelism": 32,
        "default_pool_slots": 128,
        "pools": {"warehouse": 2},
        "executor": "agent",
    }
    values.update(overrides)
    return Settings(**values)


async def put_dag(store: Store, text: str = DAG_YAML, *, paused: bool = False) -> str:
    """Store a DAG the way the API's apply does (no HTTP)."""
    spec = parse_dag(text, Path("test.yaml"))
    spec_json = spec.model_dump_json()
    await store.upsert_dag(
        spec.dag_id,
        fileloc=f"api:{spec.dag_id}",
        spec_json=spec_json,
        spec_hash=hashlib.sha256(spec_json.encode()).hexdigest(),
        source=text,
    )
    if paused:
        await store.set_dag_paused(spec.dag_id, True)
    return spec.dag_id


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(f"sqlite:///{tmp_path / 'state' / 'leoflow.db'}")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state' / 'leoflow.db'}"
        server = None
    else:
        server = request.getfixturevalue("postgres_server")
        url = await server.create_database()
    opened = await Store.open(url)
    try:
        yield opened
    finally:
        await opened.close()
        if server is not None:
            await server.drop_database(url)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def notified() -> list[int]:
    return []


@pytest.fixture
def app(store: Store, settings: Settings, notified: list[int]) -> FastAPI:
    return create_app(
        store, settings, auth=make_auth(), notify=lambda: notified.append(1), log_poll_interval=0.02
    )


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c
