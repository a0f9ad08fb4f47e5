"""What a dbt project may hold that the loader must not read: a FIFO, a device, a 300 MB
seed, an oversized manifest. Each load runs in a child process with a timeout and an
address-space cap (tests/support/dbt_load.py), so a regression fails the test instead
of hanging the suite or eating the machine's memory; the child reports its peak RSS
above what imports took. No dbt runs here: the project ships a fresh manifest."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from leoflow.dbt.files import MAX_MANIFEST_BYTES, MAX_PARSED_FILE_BYTES
from tests.integration.dbt.test_project import MANIFEST, _dag
from tests.support.dbt_load import load_in_child

HANG_GUARD_S = 120.0  # a load that blocks on a FIFO never ends; a working one is quick


def _project(tmp: Path) -> Path:
    project = tmp / "mini"
    for folder in ("models", "seeds", "target"):
        (project / folder).mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: mini\nprofile: mini\n")
    (project / "models" / "a.sql").write_text("select 1\n")
    return project


def _ship_manifest(project: Path) -> None:
    shipped = project / "target" / "manifest.json"
    shipped.write_text(json.dumps(MANIFEST))
    stamp = time.time() + 60
    os.utime(shipped, (stamp, stamp))  # newer than every file: used, no dbt parse


def _load(tmp: Path, body: str = "") -> dict[str, Any]:
    """Load ``tmp/dag.yaml`` in a child: its tasks or its error, and its RSS growth."""
    return load_in_child(_dag(tmp, body), tmp / "cache", timeout=HANG_GUARD_S)


@pytest.mark.parametrize("where", ["models/pipe.sql", "seeds/pipe.csv", "models/pipe.yml"])
def test_a_fifo_in_the_project_is_refused_by_name_without_blocking(
    tmp_path: Path, where: str
) -> None:
    project = _project(tmp_path)
    _ship_manifest(project)
    os.mkfifo(project / where)
    result = _load(tmp_path)
    assert "tasks" not in result
    assert (
        f"dbt.project_dir: dbt project file {project / where} is a FIFO (named pipe), "
        in (result["error"])
    )


def test_a_model_symlinked_to_a_device_is_refused_naming_it_and_where_it_points(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    _ship_manifest(project)
    (project / "models" / "zero.sql").symlink_to("/dev/zero")
    result = _load(tmp_path)
    assert (
        f"dbt project file {project / 'models' / 'zero.sql'} is a character device "
        f"(a symlink to /dev/zero), not a regular file" in result["error"]
    )


def test_a_300_mb_seed_is_not_read_and_a_symlinked_model_is_read_like_dbt_reads_it(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    shared = tmp_path / "shared.sql"
    shared.write_text("select 2\n")
    (project / "models" / "b.sql").symlink_to(shared)  # outside the project: followed
    with open(project / "seeds" / "big.csv", "wb") as seed:
        seed.write(b"id,name\n")
        seed.truncate(300 << 20)  # sparse: 300 MB to read, nothing on disk
    _ship_manifest(project)
    result = _load(tmp_path)
    assert result["tasks"] == ["dbt.a"]
    # Reading the seed whole grew the process by its size (+311 MB measured).
    assert result["grew_kb"] < 64 << 10


@pytest.mark.parametrize(
    ("where", "limit", "said"),
    [
        ("models/huge.sql", MAX_PARSED_FILE_BYTES, "dbt project file {path} holds more than "
         "{limit:,} bytes, the limit for a file of a dbt project"),
        ("target/manifest.json", MAX_MANIFEST_BYTES, "dbt.project_dir: {path} holds more than "
         "{limit:,} bytes, the limit for a dbt manifest"),
    ],
)  # fmt: skip
def test_a_file_past_its_bound_is_refused_unread_and_says_the_bound(
    tmp_path: Path, where: str, limit: int, said: str
) -> None:
    project = _project(tmp_path)
    _ship_manifest(project)
    stamp = (project / "target" / "manifest.json").stat().st_mtime
    path = project / where
    with open(path, "ab") as handle:
        handle.truncate(limit + 1)  # sparse: nothing on disk
    os.utime(path, (stamp, stamp))  # the shipped manifest stays fresh
    result = _load(tmp_path)
    assert said.format(path=path, limit=limit) in result["error"]
    assert result["grew_kb"] < 64 << 10


def test_profiles_yml_that_is_a_fifo_is_refused_at_profiles_dir(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _ship_manifest(project)
    (tmp_path / "profiles").mkdir()
    os.mkfifo(tmp_path / "profiles" / "profiles.yml")
    result = _load(tmp_path, "  profiles_dir: profiles\n")
    assert (
        f"dbt.profiles_dir: {tmp_path / 'profiles' / 'profiles.yml'} is a FIFO" in (result["error"])
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"nodes": []}', "is not a dbt manifest: nodes is not a mapping"),
        ('{"nodes": {"model.mini.a": 5}}', "is not a dbt manifest: nodes.model.mini.a is not a"),
        ('{"nodes": {}, "sources": {"s": []}}', "is not a dbt manifest: sources.s is not a"),
        ("[" * 200_000 + "]" * 200_000, "cannot read dbt manifest"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_a_load_error_not_a_crash(
    tmp_path: Path, content: str, said: str
) -> None:
    project = _project(tmp_path)
    _ship_manifest(project)
    shipped = project / "target" / "manifest.json"
    stamp = shipped.stat().st_mtime
    shipped.write_text(content)
    os.utime(shipped, (stamp, stamp))
    assert said in _load(tmp_path)["error"]
