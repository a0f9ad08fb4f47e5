"""``leoflow dags apply`` of a dbt DAG to a real API (over a socket, on PostgreSQL): the
client resolves the section, the API stores exactly the tasks the Lite loader makes, and
shows where they came from; the bad inputs each get a clear error.

The projects here ship a fresh ``target/manifest.json``, so no dbt runs (the pods that
run it are in tests/integration/kube/test_dbt_pro.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.api.server import RunningApi, start_server
from leoflow.dagfile.loader import LoadOptions, load_dag_file, load_options, parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.dbt.project import Project, expander, load_manifest
from leoflow.domain.catalogue import parse_spec
from leoflow.domain.dbt_resolved import manifest_sha256
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings
from tests.integration.api.test_cli import cli

pytestmark = pytest.mark.slow  # the real CLI in subprocesses


def _node(name: str, *parents: str) -> dict[str, object]:
    return {
        "resource_type": "model",
        "name": name,
        "package_name": "mini",
        "fqn": ["mini", name],
        "depends_on": {"nodes": [f"model.mini.{p}" for p in parents]},
        "config": {"materialized": "table"},
    }


def _manifest(with_c: bool = True) -> dict[str, object]:
    nodes = {"model.mini.a": _node("a"), "model.mini.b": _node("b", "a")}
    if with_c:
        nodes["model.mini.c"] = _node("c", "a", "b")
    return {"metadata": {"project_name": "mini"}, "nodes": nodes, "sources": {}}


DAG = """\
dag_id: mini_pro
defaults:
  retries: 3
  env: {REGION: eu}
tasks:
  publish:
    command: ["sh", "-c", "echo published"]
    depends_on: [dbt.c]
dbt:
  project_dir: mini
  profiles_dir: profiles
  target: prod
  executable: /nonexistent/dbt
  defaults:
    retries: 0
    pool: warehouse
    env: {MINI_DB: /data/mini.duckdb}
    secrets: [warehouse_password]
"""


def _project(tmp: Path) -> Path:
    project = tmp / "mini"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: mini\nprofile: mini\n")
    for name in ("a", "b", "c"):
        (project / "models" / f"{name}.sql").write_text("select 1\n")
    (project / "target").mkdir()
    _ship_manifest(tmp, _manifest(), ahead=60)
    (tmp / "profiles").mkdir()
    (tmp / "profiles" / "profiles.yml").write_text("mini: {target: prod, outputs: {}}\n")
    return project


@pytest.fixture
async def pg_store(postgres_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def live(pg_store: Store, tmp_path: Path) -> AsyncIterator[RunningApi]:
    app = create_app(pg_store, make_settings(tmp_path / "api"), auth=make_auth())
    running = await start_server(app, "127.0.0.1", 0)
    try:
        yield running
    finally:
        await running.close()


def _home_env(tmp_path: Path) -> dict[str, str]:
    return {"LEOFLOW_HOME": str(tmp_path / "home")}


async def test_apply_stores_the_tasks_the_lite_loader_makes_and_says_where_from(
    live: RunningApi, pg_store: Store, tmp_path: Path
) -> None:
    _project(tmp_path)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    code, out, err = await cli(live, "dags", "apply", str(path), env=_home_env(tmp_path))
    assert code == 0, err
    assert out.strip().startswith("mini_pro: created (4 tasks, 3 from dbt project mini (manifest ")

    row = await pg_store.get_dag("mini_pro")
    assert row is not None
    stored = parse_spec(row.spec_json)
    # What `leoflow run` / `leoflow lite` load from the same file with the same cache.
    cache = tmp_path / "home" / "dbt-cache"
    lite = load_dag_file(path, LoadOptions(dbt=expander(cache))).spec
    assert stored.tasks == lite.tasks
    assert stored.tasks["dbt.c"].depends_on == ("dbt.a", "dbt.b")
    assert stored.tasks["dbt.a"].retries == 0  # dbt.defaults beat the DAG's, kept so
    assert stored.tasks["publish"].retries == 3
    assert stored.tasks["dbt.a"].env["REGION"] == "eu"
    assert stored.tasks["dbt.a"].env["MINI_DB"] == "/data/mini.duckdb"
    assert stored.dbt is not None and stored.dbt.project_dir == "mini"  # as written
    # The selection graph comes along, so a run of part of the project works in Pro.
    assert lite.dbt is not None and stored.dbt.graph == lite.dbt.graph is not None
    conf = '{"dbt_select": "b+"}'
    code, out, err = await cli(live, "trigger", "mini_pro", "--conf", conf, "--run-id", "part")
    assert code == 0, out + err
    part = await pg_store.find_run("mini_pro", "part")
    assert part is not None
    tis = await pg_store.list_task_instances(run_pk=part.pk)
    assert {ti.task_id for ti in tis} == {"dbt.b", "dbt.c", "publish"}

    async with httpx.AsyncClient(base_url=live.url, headers=auth_header("viewer")) as client:
        detail = (await client.get("/api/v1/dags/mini_pro")).json()
    project = str((tmp_path / "mini").resolve())
    manifest = load_manifest(_project_of(tmp_path), cache)
    assert detail["dbt"] == {
        "project": "mini",
        "project_dir": project,
        "manifest_sha256": manifest_sha256(manifest),
        "nodes": 3,
        "tasks": ["dbt.a", "dbt.b", "dbt.c"],
    }
    # The web UI's DAG page says so too.
    open_app = create_app(pg_store, make_settings(tmp_path / "api"), auth=Auth.disabled())
    transport = httpx.ASGITransport(app=open_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as ui:
        page = (await ui.get("/dags/mini_pro")).text
    sha = detail["dbt"]["manifest_sha256"]
    assert f'<code>mini</code>: 3 nodes, manifest <code title="{sha}">{sha[:12]}</code>' in page
    command = detail["spec"]["tasks"]["dbt.b"]["command"]
    assert command[:5] == ["leoflow", "dbt-task", "--task", "dbt.b", "--"]
    assert command[5:] == [
        "/nonexistent/dbt", "run", "--select", "fqn:mini.b", "--project-dir", project,
        "--profiles-dir", str((tmp_path / "profiles").resolve()), "--target", "prod",
    ]  # fmt: skip

    # The same file again changes nothing; a changed project changes the DAG.
    code, out, _ = await cli(live, "dags", "apply", str(path), env=_home_env(tmp_path))
    assert code == 0 and "mini_pro: unchanged" in out
    (tmp_path / "mini" / "models" / "c.sql").unlink()
    _ship_manifest(tmp_path, _manifest(with_c=False), ahead=120)
    path.write_text(DAG.replace("depends_on: [dbt.c]", "depends_on: [dbt.b]"))
    code, out, err = await cli(live, "dags", "apply", str(path), env=_home_env(tmp_path))
    assert code == 0, err
    assert "mini_pro: changed (3 tasks, 2 from dbt project mini" in out
    row = await pg_store.get_dag("mini_pro")
    assert row is not None and set(parse_spec(row.spec_json).tasks) == {"publish", "dbt.a", "dbt.b"}


def _project_of(tmp_path: Path) -> Project:
    return Project(
        project_dir=(tmp_path / "mini").resolve(),
        profiles_dir=(tmp_path / "profiles").resolve(),
        target="prod",
        executable="/nonexistent/dbt",
    )


def _ship_manifest(tmp: Path, manifest: dict[str, object], ahead: float) -> None:
    shipped = tmp / "mini" / "target" / "manifest.json"
    shipped.write_text(json.dumps(manifest))
    stamp = time.time() + ahead  # newer than every project file: used as it is
    os.utime(shipped, (stamp, stamp))


async def test_apply_of_a_dbt_dag_whose_project_is_missing_names_file_and_field(
    live: RunningApi, pg_store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)  # no project beside it
    code, out, err = await cli(live, "dags", "apply", str(path), env=_home_env(tmp_path))
    assert code == 1
    missing = (tmp_path / "mini").resolve()
    assert f"{path}:10: dbt.project_dir: dbt project {missing} does not exist" in err, err
    assert out == ""
    assert await pg_store.get_dag("mini_pro") is None


async def test_a_raw_dbt_section_posted_to_the_api_is_refused_naming_dags_apply(
    live: RunningApi, pg_store: Store, tmp_path: Path
) -> None:
    _project(tmp_path)
    async with httpx.AsyncClient(base_url=live.url, headers=auth_header("admin")) as client:
        answer = await client.post(
            "/api/v1/dags",
            params={"name": "dag.yaml"},
            content=DAG,
            headers={"Content-Type": "application/yaml"},
        )
    assert answer.status_code == 422, answer.text
    problems = answer.json()["detail"]["problems"]
    assert [(p["field"], p["line"]) for p in problems] == [("dbt", 9)]
    assert "`leoflow dags apply FILE`" in problems[0]["message"]
    assert "the API does not have" in problems[0]["message"]
    assert await pg_store.get_dag("mini_pro") is None


async def test_a_resolved_section_without_its_tasks_is_refused(
    live: RunningApi, pg_store: Store, tmp_path: Path
) -> None:
    """A hand-edited resolved document that lost a dbt task: the record names it."""
    _project(tmp_path)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    from leoflow.commands.dbt_apply import resolve

    resolved = resolve(path, DAG, tmp_path / "cache")
    assert resolved.resolution is not None
    spec = parse_dag(resolved.text, Path("<api>/dag.yaml"))  # what the API parses
    assert set(spec.tasks) == {"publish", "dbt.a", "dbt.b", "dbt.c"}
    broken = resolved.text.replace("  dbt.a:\n", "  dbt.renamed:\n", 1)
    assert broken != resolved.text
    async with httpx.AsyncClient(base_url=live.url, headers=auth_header("admin")) as client:
        answer = await client.post(
            "/api/v1/dags",
            content=broken,
            headers={"Content-Type": "application/yaml"},
        )
    assert answer.status_code == 422, answer.text
    fields = {p["field"]: p["message"] for p in answer.json()["detail"]["problems"]}
    assert "dbt.resolved.tasks" in fields, fields
    assert "(dbt.a)" in fields["dbt.resolved.tasks"]
    assert await pg_store.get_dag("mini_pro") is None


def test_image_dir_names_the_project_where_the_image_holds_it_wherever_pods_run(
    tmp_path: Path,
) -> None:
    """Applied from a checkout: the pods' commands name the image's paths, the same as
    `leoflow run --executor kubernetes` gives; Lite on this host keeps the checkout's."""
    from leoflow.commands.dbt_apply import resolve

    _project(tmp_path)
    path = tmp_path / "dag.yaml"
    text = DAG.replace("  target: prod\n", "  target: prod\n  image_dir: /opt/dags/mini_pro\n")
    text = text.replace("/nonexistent/dbt", "bin/dbt")  # relative to the DAG file
    path.write_text(text)
    cache = tmp_path / "cache"
    resolved = resolve(path, text, cache)
    assert resolved.resolution is not None
    assert resolved.resolution.project_dir == "/opt/dags/mini_pro/mini"
    applied = parse_dag(resolved.text, Path("<api>/dag.yaml"))
    task = applied.tasks["dbt.b"]
    assert task.command[5:] == [
        "/opt/dags/mini_pro/bin/dbt", "run", "--select", "fqn:mini.b",
        "--project-dir", "/opt/dags/mini_pro/mini",
        "--profiles-dir", "/opt/dags/mini_pro/profiles", "--target", "prod",
    ]  # fmt: skip
    assert task.env["DBT_PROFILES_DIR"] == "/opt/dags/mini_pro/profiles"
    assert (
        task.env["LEOFLOW_DBT_PARTIAL_PARSE"]
        == "/opt/dags/mini_pro/mini/target/partial_parse.msgpack"
    )

    in_pods = load_dag_file(
        path, load_options("kubernetes", (), dbt=expander(cache, in_pods=True))
    ).spec
    assert in_pods.tasks == applied.tasks
    lite = load_dag_file(path, LoadOptions(dbt=expander(cache))).spec
    local = str((tmp_path / "mini").resolve())
    assert lite.tasks["dbt.b"].command[9:11] == ["--project-dir", local]
    assert lite.tasks["dbt.b"].command[5] == str((tmp_path / "bin" / "dbt").resolve())


def test_a_relative_image_dir_is_a_load_error_naming_it(tmp_path: Path) -> None:
    _project(tmp_path)
    path = tmp_path / "dag.yaml"
    path.write_text(DAG.replace("  target: prod\n", "  target: prod\n  image_dir: opt/dags\n"))
    with pytest.raises(DagFileError) as info:
        load_dag_file(path, LoadOptions(dbt=expander(tmp_path / "cache", in_pods=True)))
    assert [(p.field, p.line) for p in info.value.problems] == [("dbt.image_dir", 13)]
    assert "expected an absolute path inside the DAG image, got 'opt/dags'" in str(info.value)


def test_the_resolved_document_loads_to_the_same_dag_whatever_the_file_uses(
    tmp_path: Path,
) -> None:
    """Anchors and merge keys, times, durations, strings YAML would read as booleans."""
    from leoflow.commands.dbt_apply import resolve

    _project(tmp_path)
    path = tmp_path / "dag.yaml"
    text = """\
dag_id: mini_pro
schedule: "0 4 * * *"
timezone: Europe/Paris
start_date: 2026-01-01T00:00:00Z
deadline: 2h
tags: [nightly, "yes", "on"]
defaults: &d
  retries: 2
  retry_delay: 30s
  env: {X: 1, Y: true}
tasks:
  publish:
    <<: *d
    command: "echo published"
    timeout: 1h
    depends_on: [dbt.b]
dbt:
  project_dir: mini
  executable: /nonexistent/dbt
  select: "+b"
  defaults: {timeout: 10m, retries: 0}
"""
    path.write_text(text)
    cache = tmp_path / "cache"
    resolved = resolve(path, text, cache)
    assert "&" not in resolved.text and "*" not in resolved.text.replace("* * *", "")
    applied = parse_dag(resolved.text, Path("<api>/dag.yaml"))
    lite = load_dag_file(path, LoadOptions(dbt=expander(cache, in_pods=True))).spec
    assert applied.model_dump(exclude={"dbt"}) == lite.model_dump(exclude={"dbt"})
    assert set(applied.tasks) == {"publish", "dbt.a", "dbt.b"}
    assert applied.tasks["dbt.a"].retries == 0 and applied.tasks["dbt.a"].timeout == 600
    assert applied.tasks["dbt.a"].retry_delay == 30 and applied.tasks["dbt.a"].env["Y"] == "true"
