"""The assets pages in a real browser: the list, one asset's history, the lineage graph
across DAGs, and a DAG page saying which assets it waits for."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from playwright.sync_api import expect

from tests.e2e.test_web_ui import (  # noqa: F401 - fixtures
    WAIT,
    Lite,
    _get,
    _post,
    browser,
    make_lite,
    shot,
)

LAND = """dag_id: land
tasks:
  land: {command: 'true', produces: ['s3://lake/orders']}
"""
MARTS = """dag_id: marts
schedule: {assets: ['s3://lake/orders', customers]}
tasks:
  build: {command: 'true', consumes: ['s3://lake/orders', customers], produces: [marts_done]}
"""
SIZES = {"wide": (1440, 900), "phone": (390, 844)}


def _no_horizontal_overflow(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_assets_lineage_and_waiting_pages(
    make_lite: Callable[..., Lite],  # noqa: F811
    browser: Any,  # noqa: F811
    shot: Callable[[Any, str], None],  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "land.yaml").write_text(LAND)
    (folder / "marts.yaml").write_text(MARTS)
    lite = make_lite(str(folder))
    deadline = time.monotonic() + 90
    while not _get(f"{lite.base}/api/v1/assets", lite.token)["assets"]:
        assert time.monotonic() < deadline, "the DAGs were not loaded"
        time.sleep(0.2)
    _post(f"{lite.base}/api/v1/dags/land/runs", {"run_id": "first"}, lite.token)
    while _get(f"{lite.base}/api/v1/dags/land/runs/first", lite.token)["state"] != "success":
        assert time.monotonic() < deadline, "the land run did not succeed"
        time.sleep(0.2)

    for size, (width, height) in SIZES.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        lite.log_in(context)
        page = context.new_page()

        page.goto(lite.base + "/")
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Assets").click()
        expect(page).to_have_url(lite.base + "/assets", timeout=WAIT)
        orders = page.locator('tr[data-asset="s3://lake/orders"]')
        expect(orders).to_contain_text("land.land", timeout=WAIT)
        expect(orders).to_contain_text("marts.build")
        expect(orders).to_contain_text("ago")
        customers = page.locator('tr[data-asset="customers"]')
        expect(customers).to_contain_text("external")
        expect(customers.locator(".last-event")).to_have_text("none yet")
        _no_horizontal_overflow(page)
        shot(page, f"assets-list-{size}")

        orders.get_by_role("link", name="s3://lake/orders").click()
        expect(page).to_have_url(
            lite.base + "/assets/one?uri=" + quote("s3://lake/orders", safe=""), timeout=WAIT
        )
        history = page.locator("table.asset-events tbody tr")
        expect(history).to_have_count(1, timeout=WAIT)
        expect(history.first).to_contain_text("land.land")
        expect(history.first).to_contain_text("try 1")
        _no_horizontal_overflow(page)
        shot(page, f"asset-one-{size}")

        page.goto(lite.base + "/assets/lineage")
        graph = page.locator("#graph svg")
        expect(graph.locator("[data-dag]")).to_have_count(2, timeout=WAIT)
        expect(graph.locator("[data-asset]")).to_have_count(3)
        # land -> orders -> marts, customers -> marts, marts -> marts_done
        expect(graph.locator("path.edge")).to_have_count(4)
        expect(page.locator("#lineage-counts")).to_contain_text("2 DAG(s) and 3 asset(s)")
        _no_horizontal_overflow(page)
        shot(page, f"lineage-{size}")
        expect(graph.locator('[data-dag="marts"]')).to_have_attribute("href", "/dags/marts")
        expect(graph.locator('[data-asset="customers"]')).to_have_attribute(
            "href", "/assets/one?uri=customers"
        )
        page.goto(lite.base + "/dags/marts")
        # orders has an event marts has not consumed; customers has none
        expect(page.locator("#asset-waiting")).to_contain_text(
            "waiting for: customers (none yet)", timeout=WAIT
        )
        expect(page.locator("#asset-schedule")).to_have_text("asset events")
        _no_horizontal_overflow(page)
        shot(page, f"dag-waiting-{size}")
        page.goto(lite.base + "/dags/land")
        expect(page.locator("h1")).to_have_text("land", timeout=WAIT)
        expect(page.locator("#asset-waiting")).to_have_count(0)
        context.close()
