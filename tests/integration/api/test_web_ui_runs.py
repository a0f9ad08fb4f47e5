"""The web UI's DAG and run pages on a run with a 200-item mapped task (one item
failed, one running) and more task instances than one page holds: the mapped task's
node and square fold its items, its link lists them, the run page counts the whole
run and filters by state, by task id and to a mapped task's items."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest

from leoflow.api.app import create_app
from leoflow.api.auth import Auth
from leoflow.domain.mapped_states import fold_items, item_of, with_items_folded
from leoflow.domain.states import RunState, TaskState
from leoflow.settings import Settings
from leoflow.store import Store
from leoflow.store.mapping import expand_task
from leoflow.store.rows import TaskSeed
from tests.integration.api.conftest import put_dag
from tests.integration.api.seed import move

ITEMS = 200
DAG = """
dag_id: fan
tasks:
  start: {command: "true"}
  each_item:
    depends_on: [start]
    map_over: {output: start}
    command: "true"
  after:
    depends_on: [each_item]
    command: "true"
"""
DONE = (TaskState.SCHEDULED, TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCESS)
ITEMS_URL = "/dags/fan/runs/r?mapped=each_item"


@pytest.fixture
async def ui(store: Store, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    await put_dag(store, DAG)
    seeds = [TaskSeed(t, "default_pool", 1, 0, 1) for t in ("start", "each_item", "after")]
    run = await store.create_run(
        "fan", "r", run_type="manual", logical_date=None, conf={}, tasks=seeds, epoch=None
    )
    await store.transition_run(run.pk, RunState.QUEUED, RunState.RUNNING, epoch=None)
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    await move(store, tis["start"].pk, *DONE)
    items = [f'"{i}"' for i in range(ITEMS)]
    assert await expand_task(store, tis["each_item"].pk, run, seeds[1], items, epoch=None)
    by_id = {t.task_id: t for t in await store.list_task_instances(run_pk=run.pk)}
    for i in range(ITEMS):
        pk = by_id[f"each_item[{i}]"].pk
        if i == 7:
            await move(store, pk, *DONE[:3], TaskState.FAILED)
        elif i == 8:
            await move(store, pk, *DONE[:3])
        else:
            await move(store, pk, *DONE)
    app = create_app(store, settings, auth=Auth.disabled())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        yield client


def test_items_fold_into_their_task_with_the_worst_state() -> None:
    states = {"a": TaskState.SUCCESS, "m[0]": TaskState.SUCCESS, "m[1]": TaskState.FAILED}
    states |= {"m[2]": TaskState.RUNNING, "other[0]": TaskState.FAILED}
    folded = fold_items(states, {"m"})
    assert set(folded) == {"m"}, "only the DAG's mapped tasks fold"
    assert folded["m"].worst is TaskState.FAILED and folded["m"].total == 3
    assert folded["m"].words() == "1 failed · 1 running · 1 success"
    assert with_items_folded(states, {"m"})["m"] is TaskState.FAILED
    assert item_of("load[12]") == ("load", 12) and item_of("load") is None
    assert item_of("x[1][2]") == ("x[1]", 2)


async def test_the_graph_node_and_grid_square_count_the_items(ui: httpx.AsyncClient) -> None:
    page = await ui.get("/dags/fan?run=r")
    assert page.status_code == 200, page.text
    node = re.search(
        r'<g class="node s-(\w+)" data-task="each_item"[^>]*><title>([^<]*)<', page.text
    )
    assert node is not None, "the mapped task has a node"
    assert node.group(1) == "failed", "the node shows its items' worst state, not 'none'"
    assert node.group(2) == "each_item: 1 failed · 1 running · 198 success"
    assert f'href="{ITEMS_URL}"' in page.text
    square = re.search(
        r'<a class="sq s-(\w+)" href="([^"]+)" title="each_item in r: ([^"]*)"', page.text
    )
    assert square is not None and square.group(1) == "failed"
    assert square.group(2) == ITEMS_URL
    assert square.group(3) == "1 failed · 1 running · 198 success"


async def test_the_items_link_lists_the_items(ui: httpx.AsyncClient) -> None:
    page = await ui.get(ITEMS_URL)
    assert page.status_code == 200, page.text
    listed = re.findall(r'<tr data-task="([^"]+)"', page.text)
    assert len(listed) == 100 and all(t.startswith("each_item[") for t in listed)
    assert "200 shown by this filter" in page.text
    # The next page keeps the filter.
    nxt = re.search(r'href="([^"]+)">Next page', page.text)
    assert nxt is not None and "mapped=each_item" in nxt.group(1)
    second = await ui.get(nxt.group(1).replace("&amp;", "&"))
    more = re.findall(r'<tr data-task="([^"]+)"', second.text)
    assert len(more) == 100 and not set(more) & set(listed)


async def test_the_mapped_tasks_own_page_is_its_items_list(ui: httpx.AsyncClient) -> None:
    r = await ui.get("/dags/fan/runs/r/tasks/each_item")
    assert r.status_code == 303 and r.headers["location"] == ITEMS_URL
    assert (await ui.get("/dags/fan/runs/r/tasks/nothing")).status_code == 404


async def test_a_failed_item_is_one_click_from_the_run_page(ui: httpx.AsyncClient) -> None:
    page = await ui.get("/dags/fan/runs/r")
    # The whole run's counts, though page 1 holds start and items 0-98 only.
    counts = dict(re.findall(r'\?state=(\w+)">.*?</span>(?:[^<]*)</span> (\d+)</a>', page.text))
    assert counts == {"failed": "1", "running": "1", "success": "199", "none": "1"}
    assert "202 in all" in page.text
    failed = await ui.get("/dags/fan/runs/r?state=failed")
    assert re.findall(r'<tr data-task="([^"]+)"', failed.text) == ["each_item[7]"]
    assert f'href="/dags/fan/runs/r/tasks/{quote("each_item[7]", safe="")}"' in failed.text


async def test_state_groups_and_search(ui: httpx.AsyncClient) -> None:
    unfinished = await ui.get("/dags/fan/runs/r?state=unfinished")
    assert sorted(re.findall(r'<tr data-task="([^"]+)"', unfinished.text)) == [
        "after",
        "each_item[8]",
    ]
    # The search is over task ids, literal: "_" is not a wildcard.
    found = await ui.get("/dags/fan/runs/r?q=" + quote("m[19"))
    assert sorted(re.findall(r'<tr data-task="([^"]+)"', found.text)) == [
        f"each_item[19{i}]" for i in range(10)
    ] + ["each_item[19]"]
    assert "11 of 202 task instances match" in found.text
    none = await ui.get("/dags/fan/runs/r?q=a_t")
    assert re.findall(r'<tr data-task="([^"]+)"', none.text) == []
    assert "No task instance of this run matches" in none.text


@pytest.mark.parametrize("query", ["state=bogus", "q=" + "x" * 201, "after=-1"])
async def test_a_malformed_filter_is_a_message_not_a_500(ui: httpx.AsyncClient, query: str) -> None:
    r = await ui.get(f"/dags/fan/runs/r?{query}")
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("text/html")
    assert "query parameter" in r.text
