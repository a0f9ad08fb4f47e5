"""The web UI's details, in a real browser: every page fits a phone, unknown paths
get a page, dates follow the chosen zone (backfill days too), dark mode, the DAG
filter as you type, and a graph that leaves the page's wheel and touch alone,
opens its nodes with Enter, shows a wide DAG's first and last task and exposes its
links to assistive tech."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import REPO
from tests.e2e.test_web_ui import WAIT, Lite, _post, _runs, browser, make_lite, shot

__all__ = ["browser", "make_lite", "shot"]  # fixtures, used by name

CHAIN = 40


def _dags(tmp_path: Path) -> str:
    folder = tmp_path / "dags"
    folder.mkdir()
    shutil.copy(REPO / "examples/dags/etl.yaml", folder / "etl.yaml")
    tasks: dict[str, dict[str, object]] = {
        f"step_{i:02d}": {"command": ["true"]} for i in range(CHAIN)
    }
    for i in range(1, CHAIN):
        tasks[f"step_{i:02d}"]["depends_on"] = [f"step_{i - 1:02d}"]
    chain = {"dag_id": "long_chain", "timezone": "Asia/Tokyo", "tasks": tasks}
    (folder / "chain.yaml").write_text(json.dumps(chain))
    return str(folder)


def _context(browser: Any, lite: Lite, **options: Any) -> Any:
    context = browser.new_context(**options)
    lite.log_in(context)
    return context


def _ran(lite: Lite, dag_id: str) -> str:
    run = _post(f"{lite.base}/api/v1/dags/{dag_id}/runs", {}, lite.token)
    run_id: str = run["run_id"]
    return run_id


def _until(page: Any, expression: str) -> None:
    """Polls ``expression`` in the page (the CSP forbids wait_for_function's eval)."""
    for _ in range(WAIT // 50):
        if page.evaluate(expression):
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"never true: {expression}")


def _wait_success(lite: Lite, dag_id: str, page: Any) -> None:
    page.goto(f"{lite.base}/dags/{dag_id}")
    expect(page.locator(".run-pick .badge")).to_contain_text("success", timeout=WAIT)
    assert _runs(lite, dag_id)[0]["state"] == "success"


def test_every_page_fits_a_phone_and_an_unknown_path_is_a_page(
    make_lite: Callable[..., Lite], browser: Any, shot: Callable[[Any, str], None], tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    run_id = _ran(lite, "nightly_sales")
    context = _context(browser, lite, viewport={"width": 390, "height": 844})
    page = context.new_page()
    _wait_success(lite, "nightly_sales", page)
    run = f"/dags/nightly_sales/runs/{run_id}"
    paths = {
        "dags": "/",
        "waiting": "/waiting",
        "pools": "/pools",
        "dag": "/dags/nightly_sales",
        "run": run,
        "task": run + "/tasks/load_orders",
        "gantt": run + "/gantt",
        "backfills": "/dags/nightly_sales/backfills",
        "unknown": "/no/such/page",
    }
    for name, path in paths.items():
        answer = page.goto(lite.base + path)
        page.wait_for_load_state("load")
        widths = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert widths[0] <= widths[1], f"{name} ({path}) is {widths[0]} px wide on a 390 px screen"
        shot(page, f"details-390-{name}")
        if name == "unknown":
            assert answer is not None and answer.status == 404
            assert page.locator("h1").inner_text() == "404"
            assert page.locator("nav a", has_text="DAGs").is_visible()  # the site's own page
    # A browser asking for an unknown asset or a path under a known one gets a page
    # too; an API client asking for JSON gets JSON, as before.
    for path in ("/ui/static/nope.js", "/dags/nightly_sales/runs/x/y/z", "/ui/nope"):
        answer = page.goto(lite.base + path)
        assert answer is not None and answer.status == 404
        assert "text/html" in answer.headers["content-type"], path
    request = urllib.request.Request(
        lite.base + "/api/v1/nope",
        headers={"Accept": "application/json", "Authorization": f"Bearer {lite.token}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 404
    assert json.loads(refused.value.read()) == {"detail": "Not Found"}


def test_dates_follow_the_chosen_zone_backfill_days_too(
    make_lite: Callable[..., Lite], browser: Any, shot: Callable[[Any, str], None], tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    context = _context(
        browser, lite, viewport={"width": 1440, "height": 900}, timezone_id="America/New_York"
    )
    page = context.new_page()
    page.goto(lite.base + "/dags/nightly_sales")
    next_run = page.locator(".facts time").first
    iso = next_run.get_attribute("datetime")
    assert iso is not None and iso.endswith("Z")
    assert "EST" in next_run.inner_text() or "GMT-5" in next_run.inner_text()
    page.select_option("#pref-zone", "utc")
    expect(next_run).to_contain_text("UTC")
    page.select_option("#pref-zone", "dag")  # the DAG's: Europe/Berlin
    assert "Europe/Berlin" in page.locator("#pref-zone option[value=dag]").inner_text()
    text = next_run.inner_text()
    assert "CET" in text or "GMT+1" in text, text
    # The choice is kept, and a page of many DAGs shows each in its own zone.
    page.goto(lite.base + "/")
    assert page.locator("#pref-zone").input_value() == "dag"
    row = page.locator("tr[data-tz='Europe/Berlin'] time").first
    assert "CET" in row.inner_text() or "GMT+1" in row.inner_text()

    # A backfill's days are read in the zone shown: 5 Jan in Berlin starts at 23:00 UTC
    # the day before, and its 03:00 Berlin point is listed in Berlin time.
    page.goto(lite.base + "/dags/nightly_sales")
    page.click("#backfill-open")
    assert page.locator("label[for=bf-from]").inner_text() == "From (Europe/Berlin)"
    page.fill("#bf-from", "2026-01-05")
    page.fill("#bf-to", "2026-01-05")
    with page.expect_request("**/ui/actions/backfill_create") as sent:
        page.click("#bf-dry-run")
    body = json.loads(sent.value.post_data or "{}")
    assert body["start"] == "2026-01-04T23:00:00.000Z"
    assert body["end"] == "2026-01-05T22:59:59.999Z"
    expect(page.locator("#bf-preview-count")).to_contain_text("1 run(s)")
    point = page.locator("#bf-preview time").first
    assert point.get_attribute("datetime") == "2026-01-05T02:00:00Z"
    assert "03:00:00" in point.inner_text()
    shot(page, "details-backfill-zone")


def test_dark_mode_follows_the_system_and_the_toggle(
    make_lite: Callable[..., Lite], browser: Any, shot: Callable[[Any, str], None], tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    context = _context(browser, lite, color_scheme="dark", viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(lite.base + "/")
    background = "getComputedStyle(document.documentElement).backgroundColor"
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate(background) == "rgb(15, 20, 28)"
    shot(page, "details-dark")
    page.select_option("#pref-theme", "light")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.reload()
    assert page.evaluate(background) == "rgb(246, 247, 249)"
    page.select_option("#pref-theme", "auto")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def test_the_dag_filter_filters_as_you_type(
    make_lite: Callable[..., Lite], browser: Any, tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    context = _context(browser, lite, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(lite.base + "/")
    rows = page.locator("table.dags tbody td.dag-id")
    expect(rows).to_have_count(2)
    page.locator("#q").press_sequentially("chain", delay=30)  # no Enter
    expect(rows).to_have_count(1)
    assert rows.first.inner_text().startswith("long_chain")
    assert page.url.endswith("/?q=chain")
    assert page.evaluate("document.activeElement.id") == "q"  # the caret stays
    page.locator("#q").fill("")
    expect(rows).to_have_count(2)


def test_the_graph_leaves_the_wheel_to_the_page_until_engaged(
    make_lite: Callable[..., Lite], browser: Any, tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    run_id = _ran(lite, "nightly_sales")
    context = _context(browser, lite, viewport={"width": 1280, "height": 600})
    page = context.new_page()
    _wait_success(lite, "nightly_sales", page)
    transform = "document.querySelector('#graph g.viewport').getAttribute('transform')"
    before = page.evaluate(transform)
    box = page.locator("#graph").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 20, box["y"] + 20)
    page.mouse.wheel(0, 200)
    _until(page, "scrollY > 0")
    assert page.evaluate(transform) == before
    # Clicked, the graph takes the wheel: it pans and the page stays.
    page.evaluate("scrollTo(0, 0)")
    box = page.locator("#graph").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 8, box["y"] + 8)
    page.mouse.wheel(0, 150)
    _until(page, f"{transform} !== {json.dumps(before)}")
    assert page.evaluate("scrollY") == 0
    # A node is a link assistive tech sees, and Enter opens it.
    link = page.get_by_role("link", name="load_orders: success")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/tasks/load_orders")
    assert run_id.rsplit("_", 1)[1] in page.url


def test_a_wide_graph_first_shows_its_first_and_last_task(
    make_lite: Callable[..., Lite], browser: Any, shot: Callable[[Any, str], None], tmp_path: Path
) -> None:
    lite = make_lite(_dags(tmp_path))
    context = _context(browser, lite, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(lite.base + "/dags/long_chain")
    graph = page.locator("#graph").bounding_box()
    assert graph is not None
    for task in ("step_00", f"step_{CHAIN - 1:02d}"):
        node = page.locator(f"#graph g.node[data-task={task}]").bounding_box()
        assert node is not None
        inside = (
            node["x"] >= graph["x"] - 1
            and node["x"] + node["width"] <= graph["x"] + graph["width"] + 1
            and node["y"] >= graph["y"] - 1
            and node["y"] + node["height"] <= graph["y"] + graph["height"] + 1
        )
        assert inside, f"{task} at {node} is outside the graph's frame {graph}"
    shot(page, "details-wide-graph")
