"""A DAG file's ``pools:``: created when absent, by the folder (Lite) and the API's
apply alike; a pool that exists (settings, API, an earlier file) is never changed."""

from __future__ import annotations

from pathlib import Path

import httpx

from leoflow.api.app import create_app
from leoflow.dagfile.loader import LoadOptions
from leoflow.runtime.dagfolder import DagFolderWatcher
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings

DECLARES = """\
dag_id: declares
pools:
  loads: {slots: 3, description: three loads at a time}
  api_made: {slots: 9}
tasks:
  t: {command: echo t, pool: loads}
"""
# Uses the pool the other file declares, and declares one of its own.
BORROWS = """\
dag_id: borrows
pools:
  own: {slots: 4}
tasks:
  t: {command: echo t, pool: loads}
  u: {command: echo u, pool: own}
"""


async def test_the_folder_creates_declared_pools_once_and_keeps_existing_ones(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "a_borrows.yaml").write_text(BORROWS)  # sorted first: loads before its pool exists
    (folder / "declares.yaml").write_text(DECLARES)
    await store.upsert_pool("api_made", 1, "an operator's")
    said: list[str] = []
    watcher = DagFolderWatcher(folder, LoadOptions(), said.append)
    assert await watcher.refresh(store)
    assert sorted(watcher.good) == ["borrows", "declares"], said
    assert not any("error" in line for line in said), said
    pools = {p.name: (p.slots, p.description) for p in await store.list_pools()}
    assert pools == {
        "loads": (3, "three loads at a time"),
        "own": (4, ""),
        "api_made": (1, "an operator's"),
    }
    # Resized by an operator: the file, edited or not, never sizes it back.
    await store.upsert_pool("loads", 1, "")
    (folder / "declares.yaml").write_text(DECLARES.replace("slots: 3", "slots: 5"))
    assert await watcher.refresh(store)
    assert {p.name: p.slots for p in await store.list_pools()}["loads"] == 1
    assert not await watcher.refresh(store)  # nothing changed since: no load


async def test_apply_creates_declared_pools_but_not_over_the_settings(
    store: Store, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)  # pools: {warehouse: 2}
    app = create_app(store, settings, auth=make_auth())
    headers = {**auth_header("admin"), "Content-Type": "application/yaml"}
    document = DECLARES.replace("api_made: {slots: 9}", "warehouse: {slots: 9}")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        applied = await client.post("/api/v1/dags", content=document, headers=headers)
        assert applied.status_code == 201, applied.text
        listed = (await client.get("/api/v1/pools", headers=headers)).json()
    slots = {p["name"]: p["slots"] for p in listed["pools"]}
    assert slots["loads"] == 3
    assert slots["warehouse"] == 2
    assert "warehouse" not in {p.name for p in await store.list_pools()}
