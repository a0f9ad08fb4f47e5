"""Web UI round two, items 6-7, in Debian's Chromium against a real ``leoflow lite``:
mark success/failed with downstream and the scheduler's follow-up, clear failed, a
trigger form drawn from the DAG's params, and a 1,000-task DAG page's weight and the
size of its live updates (bytes, measured here; times go in benchmarks/bench_ui.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.e2e.test_web_ui import WAIT, Lite, _get, _post, _runs, browser, make_lite, shot

__all__ = ["browser", "make_lite", "shot"]  # the fixtures, shared with test_web_ui

SIZES = ({"width": 1440, "height": 900}, {"width": 390, "height": 844})
# The 1,000-task DAG page: under 300 KB of HTML (the issue's bound; 931 KB before).
PAGE_BOUND = 300 * 1024
# A live update of it while it runs: the squares and nodes that changed, not the page
# (960 KB each before). A tick sees at most a few dozen tasks change here.
UPDATE_BOUND = 64 * 1024

MARKING = """
dag_id: marking
tasks:
  a: {command: "test -f GATE || exit 3"}
  b: {command: "echo b", depends_on: [a]}
  c: {command: "echo c", depends_on: [b]}
  handler: {command: "echo handler", depends_on: [a], trigger_rule: all_failed}
"""
TYPED = """
dag_id: typed
params:
  day: {type: string, description: "The day to load, as YYYY-MM-DD"}
  count: {type: integer, default: 3, minimum: 1, maximum: 10}
  dry: {type: boolean, default: false}
  mode: {type: string, enum: [fast, slow], default: fast}
tasks:
  a: {command: "echo $LEOFLOW_CONF"}
"""


def _big(gate: Path, n: int = 1000, width: int = 100) -> str:
    """1,000 tasks in ten layers; each waits for the gate file (held until measured)."""
    lines = ["dag_id: big", "max_active_tasks: 32", "tasks:"]
    wait = f"while [ ! -f {gate} ]; do sleep 0.1; done"
    for i in range(n):
        dep = f", depends_on: [t{i - width:04d}]" if i >= width else ""
        lines.append(f"  t{i:04d}: {{command: '{wait}'{dep}}}")
    return "\n".join(lines) + "\n"


def _dags(tmp_path: Path, *, big: bool = False) -> str:
    folder = tmp_path / "dags"
    folder.mkdir(exist_ok=True)
    (folder / "marking.yaml").write_text(MARKING.replace("GATE", str(tmp_path / "gate")))
    (folder / "typed.yaml").write_text(TYPED)
    if big:  # only where measured: loading it is work a loaded machine feels
        (folder / "big.yaml").write_text(_big(tmp_path / "big-gate"))
    return str(folder)


def _wait_run(lite: Lite, dag_id: str, run_id: str, states: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT / 1000
    while time.monotonic() < deadline:
        run: dict[str, Any] = _get(f"{lite.base}/api/v1/dags/{dag_id}/runs/{run_id}", lite.token)
        if run["state"] in states:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} of {dag_id} did not reach {states}")


def _tasks(lite: Lite, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    url = f"{lite.base}/api/v1/dags/{dag_id}/runs/{run_id}/tasks?limit=1000"
    tis = _get(url, lite.token)["task_instances"]
    return {t["task_id"]: (t["state"], t["try_number"]) for t in tis}


def _unpause(lite: Lite, *dag_ids: str) -> None:
    for dag_id in dag_ids:
        _post(f"{lite.base}/api/v1/dags/{dag_id}/unpause", {}, lite.token)


def _logged_in(browser: Any, lite: Lite, size: dict[str, int]) -> tuple[Any, Any]:
    context = browser.new_context(viewport=size)
    lite.log_in(context)
    return context, context.new_page()


def test_mark_success_with_the_scheduler_following_and_clear_failed(
    make_lite: Callable[..., Lite],
    browser: Any,
    shot: Callable[[Any, str], None],
    tmp_path: Path,
) -> None:
    lite = make_lite(_dags(tmp_path))
    _unpause(lite, "marking")
    _post(f"{lite.base}/api/v1/dags/marking/runs", {"run_id": "m1"}, lite.token)
    _wait_run(lite, "marking", "m1", ("failed",))
    context, page = _logged_in(browser, lite, SIZES[0])
    page.goto(f"{lite.base}/dags/marking/runs/m1/tasks/a")
    expect(page.locator("#task-spec")).to_contain_text("exit 3")
    page.click("#mark-menu summary")
    shot(page, "actions-task-mark-menu-1440")
    page.click("#mark-success")
    expect(page.locator("#flash")).to_contain_text("Marked success: a", timeout=WAIT)
    expect(page.locator("#flash")).to_contain_text("decided again by their trigger rules: b, c")
    # The scheduler follows: b and c run (their trigger rule is met now), the run succeeds.
    _wait_run(lite, "marking", "m1", ("success",))
    assert _tasks(lite, "marking", "m1") == {
        "a": ("success", 1),
        "b": ("success", 1),
        "c": ("success", 1),
        "handler": ("success", 1),
    }
    expect(page.locator("h1 .badge")).to_contain_text("success", timeout=WAIT)

    # Mark failed with downstream on a finished run: all below are failed, the run too.
    page.click("#mark-menu summary")
    page.check("#mark-downstream")
    page.click("#mark-failed")
    expect(page.locator("#flash")).to_contain_text("Marked failed: a, b, c, handler", timeout=WAIT)
    _wait_run(lite, "marking", "m1", ("failed",))
    states = _tasks(lite, "marking", "m1")
    assert [states[t][0] for t in ("a", "b", "c", "handler")] == ["failed"] * 4

    # Clear failed from the run page: a passes now, and the run succeeds again.
    (tmp_path / "gate").touch()
    page.goto(f"{lite.base}/dags/marking/runs/m1")
    expect(page.locator("#clear-failed")).to_contain_text("Clear failed (4)")
    shot(page, "actions-run-clear-failed-1440")
    page.once("dialog", lambda d: d.accept())
    page.click("#clear-failed")
    expect(page.locator("#flash")).to_contain_text("Cleared a, b, c, handler", timeout=WAIT)
    _wait_run(lite, "marking", "m1", ("success",))
    states = _tasks(lite, "marking", "m1")
    assert (states["a"], states["handler"][0]) == (("success", 2), "skipped")

    # The page still shows a failed run's button from before: the action says what happened.
    page.evaluate(
        """() => { const b = document.createElement('button');
        b.id = 'stale'; b.dataset.action = 'clear_failed'; b.dataset.dag = 'marking';
        b.dataset.run = 'm1'; b.dataset.seenRun = 'failed'; document.body.append(b); }"""
    )
    page.click("#stale")
    expect(page.locator("#flash")).to_contain_text(
        "run 'm1' changed since the page was drawn: it was failed, it is success now", timeout=WAIT
    )
    for size in SIZES:
        page.set_viewport_size(size)
        page.goto(f"{lite.base}/dags/marking/runs/m1/tasks/a")
        shot(page, f"actions-task-page-{size['width']}")
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    context.close()


def test_the_params_form_triggers_a_run_with_typed_params(
    make_lite: Callable[..., Lite],
    browser: Any,
    shot: Callable[[Any, str], None],
    tmp_path: Path,
) -> None:
    lite = make_lite(_dags(tmp_path))
    _unpause(lite, "typed")
    context, page = _logged_in(browser, lite, SIZES[0])
    page.goto(f"{lite.base}/dags/typed")
    page.click("#trigger-open")
    form = page.locator("#params-form")
    expect(form).to_be_visible()
    assert json.loads(page.input_value("#conf")) == {"count": 3, "dry": False, "mode": "fast"}
    page.fill("[data-param=count]", "lots")
    expect(page.locator("#conf-error")).to_contain_text("count: expected an integer")
    expect(page.locator("#trigger-submit")).to_be_disabled()
    shot(page, "actions-trigger-params-1440")
    page.fill("[data-param=count]", "7")
    page.check("[data-param=dry]")
    page.select_option("[data-param=mode]", label="slow")
    # day is required: the server says so, naming the field.
    page.click("#trigger-submit")
    expect(page.locator("#conf-error")).to_have_text("conf.day: required (a string)", timeout=WAIT)
    # The JSON editor (the expert's path) reaches the same check.
    page.click("#conf-expert summary")
    page.fill("#conf", '{"day": 20261201, "count": 7}')
    page.click("#trigger-submit")
    expect(page.locator("#conf-error")).to_have_text(
        "conf.day: expected a string, got the integer 20261201", timeout=WAIT
    )
    page.fill("[data-param=day]", "2026-12-01")
    page.check("[data-param=dry]")
    page.uncheck("[data-param=dry]")
    page.check("[data-param=dry]")
    page.click("#trigger-submit")
    expect(page.locator("#flash")).to_contain_text("Triggered run", timeout=WAIT)
    (run,) = _runs(lite, "typed")
    assert run["conf"] == {"day": "2026-12-01", "count": 7, "dry": True, "mode": "slow"}
    page.set_viewport_size(SIZES[1])
    page.click("#trigger-open")
    shot(page, "actions-trigger-params-390")
    context.close()


def test_a_thousand_task_page_is_light_and_its_live_updates_send_what_changed(
    make_lite: Callable[..., Lite],
    browser: Any,
    shot: Callable[[Any, str], None],
    tmp_path: Path,
) -> None:
    lite = make_lite(_dags(tmp_path, big=True))
    _unpause(lite, "big")
    _post(f"{lite.base}/api/v1/dags/big/runs", {"run_id": "b1"}, lite.token)
    context, page = _logged_in(browser, lite, SIZES[0])
    html = context.request.get(f"{lite.base}/dags/big").body()
    assert len(html) < PAGE_BOUND, f"the 1,000-task DAG page is {len(html)} bytes"
    page.goto(f"{lite.base}/dags/big")
    # The graph comes after the page: all 1,000 nodes, then live like the rest.
    expect(page.locator("#graph g.node")).to_have_count(1000, timeout=WAIT)
    # The grid shows a window of rows, the rest a click or a search away.
    assert page.locator("table.grid tbody tr").count() == 100
    expect(page.locator("#grid-rows-said")).to_contain_text("tasks 1\u2013100 of 1000")

    # Each update's bytes as the page's own stream receives them (one stream a session).
    page.evaluate(
        """() => { window.__updates = [];
        window.leoflowUi.live.source.addEventListener('update', (e) => window.__updates.push(
            [new TextEncoder().encode(e.data).length, JSON.parse(e.data)])); }"""
    )
    (tmp_path / "big-gate").touch()  # the tasks run on: the grid's squares change
    # Until the page shows the run's end: however fast the run went (a quiet machine
    # runs the 1,000 tasks in a few updates), every update it took is recorded.
    expect(page.locator("#graph g.node[data-state=success]")).to_have_count(1000, timeout=WAIT)
    updates = page.evaluate("() => window.__updates")
    assert updates, "no live update arrived while the run went on"
    sizes = [size for size, _ in updates]
    assert max(sizes) < UPDATE_BOUND, f"live updates of {sizes} bytes"
    # Squares were sent, not grids; nodes that changed, not the graph.
    assert sum(len(u.get("cells", [])) for _, u in updates) > 0
    # The grid whole at most once: the run's end changes its frame (the column head).
    assert sum("grid" in u.get("regions", {}) for _, u in updates) <= 1
    assert all(len(u.get("nodes", {})) < 1000 for _, u in updates)
    # The browser applies them: squares turn green in place while the run goes on.
    expect(page.locator("table.grid a.sq.s-success").first).to_be_visible(timeout=WAIT)
    expect(page.locator("#graph g.node[data-state=success]").first).to_be_attached(timeout=WAIT)
    shot(page, "actions-big-dag-1440")
    page.fill("#grid-tasks", "t09")
    page.click("#grid-window button[type=submit]")
    expect(page.locator("table.grid tbody tr")).to_have_count(100, timeout=WAIT)
    expect(page.locator("#grid-rows-said")).to_contain_text("matching “t09” (1000 in all)")
    page.set_viewport_size(SIZES[1])
    page.goto(f"{lite.base}/dags/big")
    expect(page.locator("#graph g.node")).to_have_count(1000, timeout=WAIT)
    shot(page, "actions-big-dag-390")
    context.close()
