"""DELETE /api/v1/dags/{dag_id}: admin only, refused while runs are live or while the DAG's
file is in the folder, and then the DAG's row is gone (the scheduler acts on that)."""

from __future__ import annotations

import httpx

from leoflow.store import Store
from tests.integration.api.conftest import auth_header
from tests.integration.api.seed import seed


async def test_delete_needs_admin_and_no_live_run(client: httpx.AsyncClient, store: Store) -> None:
    await seed(store)  # run q of etl is queued
    refused = await client.delete("/api/v1/dags/etl", headers=auth_header("operator"))
    assert refused.status_code == 403
    live = await client.delete("/api/v1/dags/etl", headers=auth_header("admin"))
    assert live.status_code == 409
    assert live.json()["detail"] == (
        "DAG 'etl' has runs queued or running: cancel them first (leoflow cancel etl RUN)"
    )
    assert await store.get_dag("etl") is not None

    cancelled = await client.post("/api/v1/dags/etl/runs/q/cancel", headers=auth_header("operator"))
    assert cancelled.status_code == 200
    done = await client.delete("/api/v1/dags/etl", headers=auth_header("admin"))
    assert done.status_code == 200 and done.json()["dag_id"] == "etl"
    assert await store.get_dag("etl") is None
    assert len(await store.list_runs(dag_id="etl")) == 2  # the history stays
    again = await client.delete("/api/v1/dags/etl", headers=auth_header("admin"))
    assert again.status_code == 404


async def test_a_dag_loaded_from_the_folder_is_not_deleted(
    client: httpx.AsyncClient, store: Store
) -> None:
    await seed(store)
    row = await store.get_dag("etl")
    assert row is not None
    await store.upsert_dag(
        "etl", fileloc="/dags/etl.yaml", spec_json=row.spec_json, spec_hash="x", source=None
    )
    refused = await client.delete("/api/v1/dags/etl", headers=auth_header("admin"))
    assert refused.status_code == 409
    assert "is loaded from /dags/etl.yaml: remove the file" in refused.json()["detail"]
    await store.deactivate_dags_except([])  # the file is gone: only the live run stops it
    refused = await client.delete("/api/v1/dags/etl", headers=auth_header("admin"))
    assert "runs queued or running" in refused.json()["detail"]
