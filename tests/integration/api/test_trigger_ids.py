"""The API's trigger without a run id draws again when the drawn id is taken (two
triggers in one second that drew the same random part), as the scheduler's does."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import httpx
import pytest

from leoflow.domain import run_ids
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, put_dag

OPERATOR = auth_header("operator")


async def test_a_taken_drawn_id_is_drawn_again(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws = iter(["beef0001", "beef0001", "beef0002"])
    monkeypatch.setattr(run_ids, "secrets", SimpleNamespace(token_hex=lambda _: next(draws)))
    one_second = SimpleNamespace(fromtimestamp=lambda t, tz: datetime(2026, 1, 1, tzinfo=tz))
    monkeypatch.setattr(run_ids, "datetime", one_second)
    await put_dag(store)
    first = await client.post("/api/v1/dags/etl/runs", json={}, headers=OPERATOR)
    second = await client.post("/api/v1/dags/etl/runs", json={}, headers=OPERATOR)
    assert first.status_code == 201 and second.status_code == 201, second.text
    assert first.json()["run_id"] == "manual__2026-01-01T00:00:00+00:00_beef0001"
    assert second.json()["run_id"] == "manual__2026-01-01T00:00:00+00:00_beef0002"
