"""``leoflow lite``'s folder watcher re-reads a dbt DAG when only its dbt project changed:
a new model's .sql, an edited one, a seed. The real ``dbt parse`` (``.venv-dbt``)
builds each new manifest; the store is SQLite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions
from leoflow.dbt.project import expander
from leoflow.runtime.dagfolder import DagFolderWatcher
from leoflow.store import Store
from tests.integration.api import conftest
from tests.support.dbt import copy_project, dbt_bin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # runs dbt parse
store = conftest.store  # SQLite


async def _settle(watcher: DagFolderWatcher, store: Store) -> None:
    """Load until a scan sees nothing new (the first load learns where the projects are)."""
    for _ in range(3):
        if not await watcher.refresh(store):
            return
    raise AssertionError("the folder kept changing with nothing touched")


def _bump(path: Path) -> None:
    # A second edit within the file system's time resolution must still look new.
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 5))


async def test_a_new_model_in_a_dbt_project_outside_the_folder_reloads_its_dag(
    store: Store, tmp_path: Path
) -> None:
    project = copy_project(tmp_path, "shop")
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "shop.yaml").write_text(
        f"dag_id: shop\ndbt:\n  project_dir: ../shop\n  profiles_dir: ../profiles\n"
        f"  executable: {dbt_bin()}\n  tests: none\n"
        "  defaults: {env: {SHOP_DUCKDB_PATH: /nowhere, LEOFLOW_SECRET_WAREHOUSE_PASSWORD: x}}\n"
    )
    said: list[str] = []
    watcher = DagFolderWatcher(folder, LoadOptions(dbt=expander(tmp_path / "cache")), said.append)
    await _settle(watcher, store)
    assert "dbt.customer_revenue" in watcher.good["shop"].spec.tasks
    assert "dbt.big_spenders" not in watcher.good["shop"].spec.tasks

    model = project / "models" / "marts" / "big_spenders.sql"
    model.write_text("select * from {{ ref('customer_revenue') }} where revenue > 10\n")
    assert await watcher.refresh(store)
    spec = watcher.good["shop"].spec
    assert spec.tasks["dbt.big_spenders"].depends_on == ("dbt.customer_revenue",)
    stored = await store.get_dag("shop")
    assert stored is not None and "dbt.big_spenders" in stored.spec_json
    assert not await watcher.refresh(store)  # nothing changed since

    # An edit that changes the graph: big_spenders reads the snapshot's seed too.
    model.write_text(
        "select r.* from {{ ref('customer_revenue') }} r\n"
        "join {{ ref('raw_customers') }} c using (customer_id)\n"
    )
    _bump(model)
    assert await watcher.refresh(store)
    assert watcher.good["shop"].spec.tasks["dbt.big_spenders"].depends_on == (
        "dbt.customer_revenue",
        "dbt.raw_customers",
    )
    # A seed removed: its task goes, and what read it no longer loads (a dbt error).
    (project / "seeds" / "raw_payments.csv").unlink()
    assert await watcher.refresh(store)
    assert any("dbt parse failed" in line or "raw_payments" in line for line in said), said
    assert "dbt.raw_payments" in watcher.good["shop"].spec.tasks  # the last good one stays
