"""The backfill pages and a run's missed deadline in a real browser (Debian's
chromium driven by Playwright) against a real ``leoflow lite`` process.

A backfill's runs have old logical dates, so with ``deadline: 1s`` each one is
found past its deadline while it runs: the same DAG shows both features.
Screenshots go to the test's temp dir and to /tmp/ui-shots/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

# The browser, Lite and screenshot fixtures of the web UI's own browser test.
from tests.e2e.test_web_ui import WAIT, Lite, _get, browser, make_lite, shot  # noqa: F401

LATE_DAILY = """\
dag_id: late_daily
description: a daily load with a one-second deadline
schedule: "0 3 * * *"
max_active_runs: 4
deadline: 1s
tasks:
  load:
    command: sleep 3
"""


def backfill_form(page: Any, lite: Lite, start: str, end: str, max_active: int) -> None:
    """Open the DAG page's backfill form and fill it in."""
    page.goto(lite.base + "/dags/late_daily")
    page.click("#backfill-open")
    page.fill("#bf-from", start)
    page.fill("#bf-to", end)
    page.fill("#bf-max", str(max_active))


def test_backfill_pages_and_a_missed_deadline(
    make_lite: Callable[..., Lite],  # noqa: F811
    browser: Any,  # noqa: F811
    shot: Callable[[Any, str], None],  # noqa: F811
    tmp_path: Path,
) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "late_daily.yaml").write_text(LATE_DAILY)
    lite = make_lite(dags=str(dags))
    context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="UTC")
    lite.log_in(context)
    page = context.new_page()
    page.on("dialog", lambda d: d.accept())  # the cancel button's confirm()

    # From the DAG page: a dry-run preview lists the logical dates, then create.
    backfill_form(page, lite, "2026-01-01", "2026-01-04", 2)
    page.click("#bf-dry-run")
    expect(page.locator("#bf-preview-count")).to_have_text(
        "4 run(s) would be created, at most 2 active at a time.", timeout=WAIT
    )
    assert page.locator("#bf-preview li").count() == 4
    assert "Jan 01, 2026" in page.inner_text("#bf-preview li >> nth=0")
    assert _get(f"{lite.base}/api/v1/dags/late_daily/backfills", lite.token) == []  # nothing made
    shot(page, "30-backfill-dialog")
    page.click("#bf-submit")
    page.wait_for_url(lite.base + "/dags/late_daily/backfills/1", timeout=WAIT)

    # The detail follows the backfill live until every run is done.
    expect(page.locator(".facts .done")).to_have_text("4/4 done", timeout=WAIT)
    expect(page.locator("h1 .badge")).to_have_text("✓success", timeout=WAIT)
    runs = page.locator("table.points tbody th a")
    expect(runs).to_have_count(4)
    assert page.locator("table.points tbody .badge.s-late").count() == 4
    shot(page, "31-backfill-detail")

    # A second, longer backfill, cancelled from its page.
    backfill_form(page, lite, "2026-01-05", "2026-01-20", 1)
    page.click("#bf-submit")
    page.wait_for_url(lite.base + "/dags/late_daily/backfills/2", timeout=WAIT)
    page.click("#cancel-backfill")
    expect(page.locator("h1 .badge")).to_have_text("⊘cancelled", timeout=WAIT)
    assert "cancelled by" in page.inner_text(".facts")
    expect(page.locator("#cancel-backfill")).to_have_count(0)
    made = _get(f"{lite.base}/api/v1/backfills/2", lite.token)
    assert made["backfill"]["state"] == "cancelled" and len(made["pending"]) >= 14

    page.goto(lite.base + "/dags/late_daily/backfills")
    rows = page.locator("table.backfills tbody tr")
    expect(rows).to_have_count(2)
    assert "4/4 done" in rows.nth(1).inner_text() and "cancelled" in rows.nth(0).inner_text()
    shot(page, "32-backfills")

    # A backfill run's page says it missed its deadline, and which one.
    page.goto(lite.base + "/dags/late_daily/backfills/1")
    page.click("table.points tbody th a >> nth=0")
    note = page.locator("#deadline-missed")
    expect(note).to_be_visible()
    assert "This run missed its deadline" in note.inner_text()
    assert "deadline: 1.0s" in note.inner_text()
    assert "not finished 1.0s after its logical date" in note.inner_text()
    assert "Jan 01, 2026" in note.inner_text()  # due: the logical date + 1s
    expect(page.locator("h1 .badge.s-late")).to_have_text("⚠deadline missed")
    shot(page, "33-run-deadline-missed")

    # The DAG page and the DAGs page mark the late runs.
    page.goto(lite.base + "/dags/late_daily")
    page.wait_for_selector("table.grid thead a.sq.late")
    assert "missed the deadline" in page.inner_text(".late-line")
    shot(page, "34-dag-late-runs")
    page.goto(lite.base + "/")
    page.wait_for_selector("td.squares a.sq.late")
    assert "missed the deadline" in page.inner_text("td.squares")
    shot(page, "35-dags-late-runs")

    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    lite.log_in(phone)
    small = phone.new_page()
    for path, name in (
        ("/dags/late_daily/backfills/1", "36-phone-backfill"),
        ("/dags/late_daily/backfills", "37-phone-backfills"),
        (f"/dags/late_daily/runs/{made['runs'][0]['run_id']}", "38-phone-run-late"),
        ("/", "39-phone-dags-late"),
    ):
        small.goto(lite.base + path)
        small.wait_for_selector("main h1")
        shot(small, name)
    small.goto(lite.base + "/dags/late_daily")
    small.click("#backfill-open")
    shot(small, "40-phone-backfill-dialog")
    phone.close()
    context.close()
