"""``leoflow lite``'s folder scan over the README's dbt layout: a DAG file beside its dbt
project and its profiles (``dbt/analytics``, ``dbt/profiles/profiles.yml``). dbt's own
files are skipped, never reported as broken DAG files; a broken DAG file beside them
still is; a FIFO in the project's models fails that DAG by name without blocking the
scan. Real watcher, real SQLite store; no dbt runs (the project ships its manifest)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

import pytest

from leoflow.dagfile.loader import LoadOptions
from leoflow.dbt.project import expander
from leoflow.runtime.dagfolder import DagFolderWatcher
from leoflow.store import Store
from tests.integration.api import conftest
from tests.integration.dbt.test_project import MANIFEST

store = conftest.store  # SQLite
SCAN_GUARD_S = 120.0  # a scan blocked on a FIFO never ends; a working one is quick

PROFILES = "mini:\n  target: dev\n  outputs:\n    dev: {type: duckdb, path: /tmp/x.duckdb}\n"


def _layout(folder: Path) -> Path:
    """The README's layout: the DAG file, dbt/analytics and dbt/profiles beside it."""
    project = folder / "dbt" / "analytics"
    (project / "models").mkdir(parents=True)
    (project / "target").mkdir()
    (project / "dbt_project.yml").write_text("name: mini\nprofile: mini\n")
    (project / "packages.yml").write_text("packages: []\n")
    (project / "models" / "a.sql").write_text("select 1\n")
    (project / "models" / "schema.yml").write_text("version: 2\nmodels: [{name: a}]\n")
    profiles = folder / "dbt" / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(PROFILES)
    (profiles / ".user.yml").write_text("id: 5f1c\n")  # dbt writes it beside profiles.yml
    (folder / "dbt" / "selectors.yml").write_text("selectors: []\n")
    (folder / "analytics.yaml").write_text(
        "dag_id: analytics\ndbt:\n  project_dir: dbt/analytics\n  profiles_dir: dbt/profiles\n"
        "  executable: /nonexistent/dbt\n"
    )
    shipped = project / "target" / "manifest.json"
    shipped.write_text(json.dumps(MANIFEST))
    stamp = time.time() + 60
    os.utime(shipped, (stamp, stamp))  # newer than every file: used, no dbt parse
    return project


async def _refresh(watcher: DagFolderWatcher, store: Store, fifo: Path | None = None) -> None:
    try:
        async with asyncio.timeout(SCAN_GUARD_S):
            await watcher.refresh(store)
    except TimeoutError:
        pytest.fail(f"the folder scan did not finish within {SCAN_GUARD_S:g}s: it blocked")
    finally:
        if fifo is not None:  # release a reader a regression left blocked on it
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_dbt_s_own_files_in_the_dag_folder_are_no_broken_dag_but_a_broken_dag_is(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    _layout(folder)
    (folder / "broken.yaml").write_text("dag_id: broken\ntasks: [not, a, mapping]\n")
    said: list[str] = []
    watcher = DagFolderWatcher(folder, LoadOptions(dbt=expander(tmp_path / "cache")), said.append)
    await _refresh(watcher, store)
    assert set(watcher.good) == {"analytics"}
    assert set(watcher.good["analytics"].spec.tasks) == {"dbt.a"}
    errors = dict(await store.list_dag_errors())
    assert set(errors) == {str(folder / "broken.yaml")}, errors
    assert all("profiles.yml" not in line and ".user.yml" not in line for line in said)


async def test_a_fifo_in_the_models_fails_its_dag_by_name_and_the_scan_goes_on(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "dags"
    project = _layout(folder)
    fifo = project / "models" / "events.sql"
    os.mkfifo(fifo)
    (folder / "plain.yaml").write_text("dag_id: plain\ntasks:\n  t: {command: [echo, hi]}\n")
    watcher = DagFolderWatcher(
        folder, LoadOptions(dbt=expander(tmp_path / "cache")), lambda _: None
    )
    await _refresh(watcher, store, fifo)
    assert set(watcher.good) == {"plain"}
    errors = dict(await store.list_dag_errors())
    assert set(errors) == {str(folder / "analytics.yaml")}
    assert (
        f"dbt project file {fifo} is a FIFO (named pipe), not a regular file"
        in (errors[str(folder / "analytics.yaml")])
    )
