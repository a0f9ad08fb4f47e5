from __future__ import annotations

from typing import Any

import pytest

from leoflow.store import Store

from .helpers import compiled_statements


async def test_upsert_dag_reports_inserted_and_changed(store: Store) -> None:
    kwargs: dict[str, Any] = {
        "fileloc": "/dags/a.yaml",
        "spec_json": '{"a":1}',
        "spec_hash": "h1",
        "source": "x",
    }
    assert await store.upsert_dag("a", **kwargs) is True
    assert await store.upsert_dag("a", **kwargs) is False
    assert await store.upsert_dag("a", **{**kwargs, "spec_hash": "h2", "spec_json": "{}"}) is True
    assert await store.upsert_dag("a", **{**kwargs, "spec_hash": "h2", "source": None}) is True
    assert await store.upsert_dag("a", **{**kwargs, "spec_hash": "h2", "source": None}) is False
    row = await store.get_dag("a")
    assert row is not None
    assert (row.dag_id, row.fileloc, row.spec_json, row.spec_hash, row.source) == (
        "a", "/dags/a.yaml", '{"a":1}', "h2", None,
    )  # fmt: skip
    assert row.active is True and row.paused is False and row.last_error is None
    assert row.updated_at > 0
    assert await store.get_dag("missing") is None


async def test_pause_survives_upsert_and_deactivation_keeps_rows(store: Store) -> None:
    for dag_id in ("a", "b", "c"):
        await store.upsert_dag(
            dag_id, fileloc=f"/d/{dag_id}", spec_json="{}", spec_hash="h", source=None
        )
    assert await store.set_dag_paused("a", True) is True
    assert await store.set_dag_paused("nope", True) is False
    await store.upsert_dag("a", fileloc="/d/a", spec_json="{}", spec_hash="h2", source=None)
    a = await store.get_dag("a")
    assert a is not None and a.paused is True

    await store.deactivate_dags_except(["a"])
    rows = {row.dag_id: row for row in await store.list_dags()}
    assert sorted(rows) == ["a", "b", "c"]
    assert [rows[d].active for d in ("a", "b", "c")] == [True, False, False]
    # The file is back: upsert re-activates even with an unchanged spec.
    assert await store.upsert_dag("b", fileloc="/d/b", spec_json="{}", spec_hash="h", source=None)
    b = await store.get_dag("b")
    assert b is not None and b.active is True
    await store.deactivate_dags_except([])
    assert not any(row.active for row in await store.list_dags())


async def test_deactivate_with_a_long_keep_list(store: Store) -> None:
    for i in range(5):
        await store.upsert_dag(f"d{i}", fileloc="/f", spec_json="{}", spec_hash="h", source=None)
    keep = [f"d{i}" for i in range(3)] + [f"other{i}" for i in range(1200)]
    await store.deactivate_dags_except(keep)
    active = {row.dag_id: row.active for row in await store.list_dags()}
    assert active == {"d0": True, "d1": True, "d2": True, "d3": False, "d4": False}


async def test_import_errors_per_file(store: Store) -> None:
    await store.upsert_dag("a", fileloc="/d/a.yaml", spec_json="{}", spec_hash="h", source=None)
    await store.set_dag_error("/d/a.yaml", "line 3: tasks.x.command: field required")
    await store.set_dag_error("/d/b.yaml", "not YAML")
    await store.set_dag_error("/d/b.yaml", "still not YAML")
    assert await store.list_dag_errors() == [
        ("/d/a.yaml", "line 3: tasks.x.command: field required"),
        ("/d/b.yaml", "still not YAML"),
    ]
    a = await store.get_dag("a")
    assert a is not None and a.last_error == "line 3: tasks.x.command: field required"
    await store.set_dag_error("/d/a.yaml", None)
    await store.set_dag_error("/d/never.yaml", None)
    assert await store.list_dag_errors() == [("/d/b.yaml", "still not YAML")]
    a = await store.get_dag("a")
    assert a is not None and a.last_error is None


async def test_pools(store: Store) -> None:
    assert await store.list_pools() == []
    await store.upsert_pool("warehouse", 4, "the DWH")
    await store.upsert_pool("api", 1)
    await store.upsert_pool("warehouse", 8, "bigger")
    pools = await store.list_pools()
    assert [(p.name, p.slots, p.description) for p in pools] == [
        ("api", 1, ""),
        ("warehouse", 8, "bigger"),
    ]
    assert all(p.updated_at > 0 for p in pools)
    assert await store.delete_pool("api") is True
    assert await store.delete_pool("api") is False
    assert [p.name for p in await store.list_pools()] == ["warehouse"]


async def test_upserts_compile_no_statement_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dialects' INSERT ... ON CONFLICT DO UPDATE has no SQLAlchemy cache key: a
    DAG folder of 1,000 files compiled the DAG upsert 1,000 times at each start. After
    the first of each, none is compiled again, and each still does what it did."""
    kwargs: dict[str, Any] = {"spec_json": "{}", "spec_hash": "h", "source": None}
    await store.upsert_dag("first", fileloc="/dags/first.yaml", **kwargs)
    await store.set_dag_error("/dags/broken0.yaml", "bad")
    await store.upsert_pool("p0", 1)
    compiled = compiled_statements(monkeypatch)
    for i in range(4):
        assert await store.upsert_dag(f"d{i}", fileloc=f"/dags/d{i}.yaml", **kwargs) is True
        assert await store.upsert_dag(f"d{i}", fileloc=f"/dags/d{i}.yaml", **kwargs) is False
        await store.set_dag_error(f"/dags/broken{i}.yaml", f"error {i}")
        await store.upsert_pool(f"p{i}", i + 1, f"pool {i}")
    await store.set_dag_error("/dags/broken0.yaml", "still bad")
    upserts = [sql for sql in compiled if sql.startswith("INSERT INTO")]
    assert upserts == []
    await store.deactivate_dags_except(["first"])
    assert await store.upsert_dag("d0", fileloc="/dags/d0.yaml", **kwargs) is True  # re-activated
    row = await store.get_dag("d0")
    assert row is not None and row.active and row.fileloc == "/dags/d0.yaml"
    errors = dict(await store.list_dag_errors())
    assert errors["/dags/broken0.yaml"] == "still bad" and errors["/dags/broken3.yaml"] == "error 3"
    pools = {p.name: (p.slots, p.description) for p in await store.list_pools()}
    assert pools["p0"] == (1, "pool 0") and pools["p3"] == (4, "pool 3")
