"""Every try has its own facts: ``GET .../tasks/{task}/tries`` and the task page's
``?try=N`` show try N's start, end, exit code, reason, message and where it ran,
not the latest try's."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.domain.states import RunState, TaskState
from leoflow.settings import Settings
from leoflow.store import Store, TaskChange
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import auth_header, make_auth, put_dag

S = TaskState
URL = "/api/v1/dags/etl/runs/r/tasks/transform/tries"


async def _seed(store: Store) -> None:
    """transform: try 1 exits 3 on host-a, try 2 is lost on host-b, try 3 succeeds."""
    await put_dag(store)
    seeds = [TaskSeed(t, "default_pool", 1, 0, 3) for t in ("extract", "transform", "load")]
    run = await store.create_run(
        "etl", "r", run_type="manual", logical_date=None, conf={}, tasks=seeds, epoch=None
    )
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t.pk for t in await store.list_task_instances(run_pk=run.pk)}
    pk = tis["transform"]
    ends = [
        (S.UP_FOR_RETRY, 3, "exit_code", "try one said boom", "proc:host-a:101"),
        (S.UP_FOR_RETRY, None, "lost", "try two was lost", "proc:host-b:202"),
        (S.SUCCESS, 0, "success", None, "proc:host-c:303"),
    ]
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    for number, (end, code, reason, message, ref) in enumerate(ends, start=1):
        at = 1000.0 * number
        changes = [
            TaskChange(pk, S.SCHEDULED, S.QUEUED, None, {"try_number": number, "queued_at": at}),
            TaskChange(pk, S.QUEUED, S.RUNNING, None, {"started_at": at + 1, "executor_ref": ref}),
            TaskChange(
                pk,
                S.RUNNING,
                end,
                None,
                {"ended_at": at + 2, "exit_code": code, "reason": reason, "message": message},
            ),
        ]
        if end is S.UP_FOR_RETRY:
            changes.append(TaskChange(pk, S.UP_FOR_RETRY, S.SCHEDULED))
        assert all(await store.transition_tasks(changes, epoch=None))


@pytest.fixture
async def api(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await _seed(store)
    app = create_app(store, settings, auth=make_auth())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        yield client


async def test_the_tries_route_lists_each_try_with_its_own_facts(api: httpx.AsyncClient) -> None:
    r = await api.get(URL, headers=auth_header("viewer"))
    assert r.status_code == 200, r.text
    tries = r.json()["tries"]
    assert [t["try_number"] for t in tries] == [1, 2, 3]
    assert [t["latest"] for t in tries] == [False, False, True]
    assert [(t["exit_code"], t["reason"], t["message"]) for t in tries] == [
        (3, "exit_code", "try one said boom"),
        (None, "lost", "try two was lost"),
        (0, "success", None),
    ]
    assert [t["host"] for t in tries] == ["host-a", "host-b", "host-c"]
    assert [t["pid"] for t in tries] == ["101", "202", "303"]
    assert tries[0]["started_at"].startswith("1970-01-01T00:16:41")
    assert tries[2]["state"] == "success"


async def test_a_task_never_tried_has_no_tries(api: httpx.AsyncClient) -> None:
    r = await api.get(URL.replace("transform", "load"), headers=auth_header("viewer"))
    assert r.status_code == 200 and r.json() == {"tries": []}
    missing = await api.get(URL.replace("transform", "nope"), headers=auth_header("viewer"))
    assert missing.status_code == 404


async def test_the_task_page_shows_the_chosen_try(store: Store, settings: Settings) -> None:
    await _seed(store)
    app = create_app(store, settings, auth=Auth.disabled())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as ui:
        first = await ui.get("/dags/etl/runs/r/tasks/transform?try=1")
        latest = await ui.get("/dags/etl/runs/r/tasks/transform")
    assert first.status_code == 200 and latest.status_code == 200
    assert 'id="try-facts" data-try="1"' in first.text
    assert "try one said boom" in first.text and "exited with code 3" in first.text
    assert "<code>host-a</code>" in first.text and "host-c" not in first.text
    assert "an earlier try" in first.text and "s-border-up_for_retry" in first.text
    assert 'id="try-facts" data-try="3"' in latest.text
    assert "try one said boom" not in latest.text and "This try succeeded" in latest.text
    assert re.search(r"<dt>Ran on</dt><dd><code>host-c</code>, agent pid 303", latest.text)


async def test_the_gantt_draws_every_try_with_a_link_to_it(api: httpx.AsyncClient) -> None:
    r = await api.get("/dags/etl/runs/r/gantt")
    assert r.status_code == 303, "a browser without a session is sent to log in"
    await api.post(
        "/ui/login", json={"token": "tok-viewer-1"}, headers={"Origin": "http://localhost"}
    )
    page = await api.get("/dags/etl/runs/r/gantt")
    assert page.status_code == 200, page.text
    bars = re.findall(
        r'<a href="([^"]+)" class="gantt-try" data-task="([^"]+)" data-try="(\d)"', page.text
    )
    assert [(task, n) for _, task, n in bars] == [
        ("transform", "1"),
        ("transform", "2"),
        ("transform", "3"),
    ]
    assert bars[0][0] == "/dags/etl/runs/r/tasks/transform?try=1"
    assert 'class="run s-up_for_retry"' in page.text and 'class="run s-success"' in page.text
    assert "3 tries of 3 task instances; 2 not tried yet" in page.text
    run_page = await api.get("/dags/etl/runs/r")
    assert 'href="/dags/etl/runs/r/gantt"' in run_page.text


async def test_a_try_in_a_warm_pod_says_which_pod_and_its_nth_task(
    store: Store, settings: Settings
) -> None:
    await _seed(store)
    (run,) = await store.list_runs(dag_id="etl")
    pk = {t.task_id: t.pk for t in await store.list_task_instances(run_pk=run.pk)}["extract"]
    ref = "pod:lfw-etl-0a1b2c3d-99aa@uid-1;warm=3"
    assert await store.transition_task(pk, S.NONE, S.SCHEDULED, epoch=None)
    assert all(
        await store.transition_tasks(
            [
                TaskChange(pk, S.SCHEDULED, S.QUEUED, None, {"try_number": 1, "queued_at": 5.0}),
                TaskChange(pk, S.QUEUED, S.RUNNING, None, {"started_at": 6.0, "executor_ref": ref}),
            ],
            epoch=None,
        )
    )
    app = create_app(store, settings, auth=Auth.disabled())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        tries = (await client.get(URL.replace("transform", "extract"))).json()["tries"]
        page = await client.get("/dags/etl/runs/r/tasks/extract")
        other = (await client.get(URL)).json()["tries"]
    (only,) = tries
    assert (only["pod"], only["pod_kind"], only["pod_task"]) == ("lfw-etl-0a1b2c3d-99aa", "warm", 3)
    assert "(warm pod, its task 3)" in page.text, page.text
    assert {t["pod_kind"] for t in other} == {None}  # Lite's agent: no pod at all
