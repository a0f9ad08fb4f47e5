"""The web UI's mark, clear-failed and changed-meanwhile answers, and the task page's
facts of the task (command, env names without values, resources, output)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.domain.states import RunState, TaskState
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import make_auth, put_dag
from tests.integration.api.seed import move, seed
from tests.integration.api.test_web_ui import SAME, _client, _login

ENV_DAG = """
dag_id: envy
tasks:
  fetch:
    command: ["python", "-c", "print(1)"]
    env: {API_KEY: "s3cr3t-value-xyz", REGION: "eu-west-9"}
    resources: {requests: {cpu: "250m", memory: 64Mi}, limits: {memory: 128Mi}}
"""


@pytest.fixture
async def ui(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await seed(store)
    async with await _client(create_app(store, settings, auth=make_auth())) as c:
        yield c


async def test_mark_from_the_task_page_with_what_the_page_showed(
    ui: httpx.AsyncClient, store: Store
) -> None:
    csrf = await _login(ui, "operator")
    page = (await ui.get("/dags/etl/runs/r/tasks/transform")).text
    assert 'id="mark-success"' in page and 'data-seen-task="failed:1"' in page
    headers = {**SAME, "X-CSRF-Token": csrf}
    body = {"dag_id": "etl", "run_id": "r", "task_id": "transform", "state": "success"}
    # The page showed try 0 (an older page): the task changed since; nothing is done.
    stale = await ui.post(
        "/ui/actions/mark", json={**body, "seen_task": "failed:0"}, headers=headers
    )
    assert stale.status_code == 409
    assert stale.json()["detail"].startswith(
        "task 'transform' changed since the page was drawn: it was failed (try 0), "
        "it is failed (try 1) now. Nothing was done"
    )
    bad = await ui.post("/ui/actions/mark", json={**body, "state": "done"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["detail"].startswith("state: expected")
    r = await ui.post("/ui/actions/mark", json={**body, "seen_task": "failed:1"}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "marked": ["transform"],
        "reopened": ["load"],
        "state": "success",
        "pending": False,
    }
    # The run page drew the run failed; it is running again now: clear failed says so.
    again = await ui.post(
        "/ui/actions/clear_failed",
        json={"dag_id": "etl", "run_id": "r", "seen_run": "failed"},
        headers=headers,
    )
    assert again.status_code == 409
    assert "it was failed, it is running now" in again.json()["detail"]


async def test_clear_failed_from_the_run_page_and_a_viewer_is_refused(
    ui: httpx.AsyncClient, store: Store
) -> None:
    csrf = await _login(ui, "viewer")
    page = (await ui.get("/dags/etl/runs/r")).text
    assert 'id="clear-failed"' not in page  # no actions for a viewer
    forged = await ui.post(
        "/ui/actions/clear_failed",
        json={"dag_id": "etl", "run_id": "r"},
        headers={**SAME, "X-CSRF-Token": csrf},
    )
    assert forged.status_code == 403
    csrf = await _login(ui, "operator")
    page = (await ui.get("/dags/etl/runs/r")).text
    assert "Clear failed (2)" in page
    r = await ui.post(
        "/ui/actions/clear_failed",
        json={"dag_id": "etl", "run_id": "r", "seen_run": "failed"},
        headers={**SAME, "X-CSRF-Token": csrf},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"cleared": ["load", "transform"]}
    run = await store.find_run("etl", "r")
    assert run is not None and run.state is RunState.RUNNING


async def test_the_task_page_shows_command_env_names_resources_and_output(
    ui: httpx.AsyncClient, store: Store
) -> None:
    await put_dag(store, ENV_DAG)
    run = await store.create_run(
        "envy", "e1", run_type="manual", logical_date=None, conf={},
        tasks=[TaskSeed("fetch", "default_pool", 1, 0, 1)], epoch=None,
    )  # fmt: skip
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    path = (TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCESS)
    await move(store, ti.pk, *path, output='{"rows": 42, "where": "s3://bucket/x"}')
    await _login(ui, "viewer")
    page = (await ui.get("/dags/envy/runs/e1/tasks/fetch")).text
    assert "[&#34;python&#34;, &#34;-c&#34;, &#34;print(1)&#34;]" in page
    assert "<code>API_KEY</code>" in page and "<code>REGION</code>" in page
    assert "s3cr3t-value-xyz" not in page and "eu-west-9" not in page  # names, never values
    assert "cpu 250m, memory 64Mi" in page and "memory 128Mi" in page
    assert "&#34;rows&#34;: 42" in page
