"""A DAG's params type a trigger's conf: defaults filled in, a missing required param or
a value of the wrong kind refused with the field named, other keys kept."""

from __future__ import annotations

import httpx
import pytest

from leoflow.store import Store
from tests.integration.api.conftest import auth_header, put_dag

DAG = """
dag_id: typed
params:
  day: {type: string, description: "the day to load"}
  count: {type: integer, default: 3, minimum: 1, maximum: 10}
  ratio: {type: number, default: 0.5}
  dry: {type: boolean, default: false}
  mode: {type: string, enum: [fast, slow], default: fast}
  tables: {type: array, default: []}
tasks:
  a: {command: "true"}
"""
URL = "/api/v1/dags/typed/runs"


async def test_defaults_fill_the_conf_and_other_keys_stay(
    client: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, DAG)
    r = await client.post(
        URL,
        json={"conf": {"day": "2026-12-01", "count": 7, "extra": 1}},
        headers=auth_header("operator"),
    )
    assert r.status_code == 201, r.text
    assert r.json()["conf"] == {
        "day": "2026-12-01", "count": 7, "extra": 1,
        "ratio": 0.5, "dry": False, "mode": "fast", "tables": [],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("conf", "detail"),
    [
        ({}, "conf.day: required (a string)"),
        ({"day": 5}, "conf.day: expected a string, got the integer 5"),
        ({"day": "d", "count": "many"}, "conf.count: expected an integer, got the string 'many'"),
        ({"day": "d", "count": 2.5}, "conf.count: expected an integer, got the number 2.5"),
        ({"day": "d", "count": 11}, "conf.count: expected at most 10, got 11"),
        ({"day": "d", "dry": "yes"}, "conf.dry: expected true or false, got the string 'yes'"),
        (
            {"day": "d", "mode": "warp"},
            "conf.mode: expected one of ['fast', 'slow'], got the string 'warp'",
        ),
        ({"day": "d", "tables": "t1"}, "conf.tables: expected a list, got the string 't1'"),
    ],
)
async def test_a_conf_that_does_not_fit_is_refused_naming_the_field(
    client: httpx.AsyncClient, store: Store, conf: dict[str, object], detail: str
) -> None:
    await put_dag(store, DAG)
    r = await client.post(URL, json={"conf": conf}, headers=auth_header("operator"))
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == detail
    assert await store.list_runs(dag_id="typed", limit=5) == []  # no run made
