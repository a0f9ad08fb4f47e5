"""Logs you can work with and runs you can find, in a real browser (Debian's chromium
driven by Playwright) against a real ``leoflow lite`` process, as a viewer.

A task writes a 16 MiB log (262,144 numbered lines of 64 bytes); the runs pages
list 1,008 runs written into Lite's SQLite database beside it. Screenshots go to
the test's temp dir and to /tmp/ui-shots/.
"""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

# The browser, Lite and screenshot fixtures of the web UI's own browser test.
from tests.e2e.test_web_ui import (  # noqa: F401
    SHOTS,
    TOKENS,
    WAIT,
    Lite,
    _get,
    _post,
    browser,
    make_lite,
    shot,
    write_tokens,
)

# A 16 MiB log and 1,008 runs are made and read in the browser: minutes on a loaded
# machine, not the suite's default two.
pytestmark = pytest.mark.timeout(600)

LINES = 262_144
BIG_LOG = f"""\
dag_id: big_log
description: writes a 16 MiB log
tasks:
  write:
    command: >-
      python3 -c "import sys; w = sys.stdout.write;
      [w('line %07d %s\\\\n' % (i, 'x' * 50)) for i in range(1, {LINES} + 1)]"
"""
MANY_RUNS = """\
dag_id: many_runs
description: its runs are written into the database by the test
tasks:
  only:
    command: "true"
"""
EXPECTED = b"".join(b"line %07d %s\n" % (i, b"x" * 50) for i in range(1, LINES + 1))
RUNS = 1008
# Every 7th run failed, every 11th of those not failed cancelled, every 5th a backfill.
DAY = 86_400.0
START = 1_700_000_000.0


def _seed_runs(db: Path) -> dict[str, int]:
    """RUNS finished runs of many_runs, written as the store writes them."""
    counts = {"failed": 0, "cancelled": 0, "backfill": 0}
    rows = []
    for i in range(RUNS):
        state, message = "success", None
        if i % 7 == 0:
            state, message = "failed", "a task failed"
            counts["failed"] += 1
        elif i % 11 == 0:
            state, message = "failed", "cancelled by ops"
            counts["cancelled"] += 1
        kind = "backfill" if i % 5 == 0 else "scheduled"
        counts["backfill"] += kind == "backfill"
        date = START + i * DAY
        rows.append(
            ("many_runs", f"run_{i:04d}", state, kind, date, "{}", date, date, date + 90, message)
        )
    with sqlite3.connect(db, timeout=30) as conn:
        conn.executemany(
            "INSERT INTO dag_runs (dag_id, run_id, state, run_type, logical_date, conf,"
            " created_at, started_at, ended_at, message) VALUES (?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
    return counts


def _wait_success(lite: Lite, dag_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        runs = _get(f"{lite.base}/api/v1/dags/{dag_id}/runs", TOKENS["operator"])["runs"]
        if runs and runs[0]["state"] in ("success", "failed"):
            assert runs[0]["state"] == "success", runs[0]
            return dict(runs[0])
        time.sleep(0.3)
    raise AssertionError(f"{dag_id} did not finish")


def _no_sideways_overflow(page: Any) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], (page.url, width)


def test_a_viewer_searches_links_and_downloads_a_16_mib_log_and_finds_runs(
    make_lite: Callable[..., Lite],  # noqa: F811
    browser: Any,  # noqa: F811
    shot: Callable[[Any, str], None],  # noqa: F811
    tmp_path: Path,
) -> None:
    tokens = write_tokens(tmp_path)
    dags = tmp_path / "dags"
    dags.mkdir()
    for name, text in (("big_log", BIG_LOG), ("many_runs", MANY_RUNS)):
        (dags / f"{name}.yaml").write_text(text)
    lite = make_lite(dags=str(dags), LEOFLOW_API_TOKENS_FILE=str(tokens))
    _post(f"{lite.base}/api/v1/dags/big_log/runs", {"run_id": "big"}, TOKENS["operator"])
    _wait_success(lite, "big_log")
    counts = _seed_runs(Path(lite.env["LEOFLOW_HOME"]) / "leoflow.db")

    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, timezone_id="UTC", accept_downloads=True
    )
    login = context.request.post(
        lite.base + "/ui/login",
        data=json.dumps({"token": TOKENS["viewer"]}),
        headers={"Content-Type": "application/json", "Origin": lite.base},
    )
    assert login.status == 200
    page = context.new_page()
    task = lite.base + "/dags/big_log/runs/big/tasks/write"
    page.goto(task)
    # A viewer reads the log: its last page, in numbered lines.
    expect(page.locator(f"#L{LINES}")).to_contain_text(f"line {LINES:07d}", timeout=WAIT)
    assert page.locator("#log-earlier").is_visible()
    assert page.locator("#log-text .ll").count() < 2000  # a page, not 16 MiB

    # Search on the server for the first and the last line; click to jump.
    page.fill("#log-q", "line 0000001 ")
    page.click("#log-search button[type=submit]")
    expect(page.locator("#log-hits li")).to_have_count(1, timeout=WAIT)
    expect(page.locator("#log-found-words")).to_contain_text("1 line holds")
    page.click("#log-hits a[data-line='1']")
    expect(page.locator("#L1.hit")).to_contain_text("line 0000001", timeout=WAIT)
    assert page.url.endswith("#L1")
    shot(page, "40-log-search-first-line")
    page.fill("#log-q", f"line {LINES:07d}")
    page.click("#log-search button[type=submit]")
    expect(page.locator(f"#log-hits a[data-line='{LINES}']")).to_have_count(1, timeout=WAIT)
    page.click(f"#log-hits a[data-line='{LINES}']")
    expect(page.locator(f"#L{LINES}.hit")).to_be_visible(timeout=WAIT)
    page.fill("#log-q", "no such text anywhere")
    page.click("#log-search button[type=submit]")
    expect(page.locator("#log-found-words")).to_have_text(
        "No line holds “no such text anywhere”.", timeout=WAIT
    )
    page.fill("#log-q", "x" * 200 + "y")  # maxlength 200 in the page; the server says so too
    answer = page.evaluate(
        "async () => { const r = await fetch('/ui/log/search?dag=big_log&run=big&task=write"
        "&try=1&q=' + 'x'.repeat(201)); return [r.status, (await r.json()).detail]; }"
    )
    assert answer[0] == 422 and "at most 200" in answer[1]

    # A link to line 120 opens the page at it, highlighted.
    page.goto(task + "#L120")
    expect(page.locator("#L120.hit")).to_contain_text("line 0000120", timeout=WAIT)
    background = page.eval_on_selector("#L120", "el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")
    assert page.eval_on_selector("#L120", "el => el.getBoundingClientRect().height") > 0
    shot(page, "41-log-line-120")

    # Wrap toggle: lines stop wrapping, and the choice is kept.
    page.uncheck("#log-wrap")
    assert page.eval_on_selector("#log-text", "el => getComputedStyle(el).whiteSpace") == "pre"
    page.reload()
    expect(page.locator("#L120")).to_be_visible(timeout=WAIT)
    assert not page.is_checked("#log-wrap")
    page.check("#log-wrap")

    # Download: the whole log, byte for byte.
    with page.expect_download(timeout=WAIT) as fetched:
        page.click("#log-download")
    saved = tmp_path / "downloaded.log"
    fetched.value.save_as(saved)
    assert fetched.value.suggested_filename == "big_log.big.write.try1.log"
    assert saved.read_bytes() == EXPECTED

    # Runs of many_runs: filters, keyset pages, jump to date.
    runs = lite.base + "/dags/many_runs/runs"
    page.goto(runs)
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(rows).to_have_count(50, timeout=WAIT)
    assert rows.first.get_attribute("data-run") == f"run_{RUNS - 1:04d}"
    shot(page, "42-runs-dag")
    seen: list[str] = []
    while True:
        seen += [r.get_attribute("data-run") for r in rows.all()]
        older = page.locator("#runs-older")
        if older.count() == 0:
            break
        older.click()
        page.wait_for_load_state()
    assert len(seen) == len(set(seen)) == RUNS
    page.goto(runs)
    page.select_option("select[name=state]", "cancelled")
    page.click(".runs-filter button[type=submit]")
    page.wait_for_url("**state=cancelled**")
    cancelled = min(50, counts["cancelled"])
    expect(rows).to_have_count(cancelled, timeout=WAIT)
    assert {r.get_attribute("data-state") for r in rows.all()} == {"cancelled"}
    page.goto(runs + "?state=failed&type=backfill")
    states = {r.get_attribute("data-state") for r in rows.all()}
    assert states == {"failed"}
    page.goto(runs)
    day = time.strftime("%Y-%m-%d", time.gmtime(START + 100 * DAY))
    page.fill("#runs-at", day)
    page.click(".runs-jump button[type=submit]")
    page.wait_for_url(f"**at={day}**")
    assert rows.first.get_attribute("data-run") == "run_0100"
    page.goto(runs + "?from=2026-99-01&state=nope")
    assert page.locator(".notice").count() == 2
    expect(rows).to_have_count(50)
    shot(page, "43-runs-bad-filter")
    page.goto(lite.base + "/runs")
    expect(rows).to_have_count(50)
    shot(page, "44-runs-all")
    # The DAG's grid: each run's date and duration in its column's head.
    page.goto(lite.base + "/dags/many_runs")
    expect(page.locator("tr.run-facts td.run-fact")).to_have_count(12, timeout=WAIT)
    assert page.locator("tr.run-facts .run-took").first.inner_text() == "1m30s"
    shot(page, "48-dag-grid-heads")

    # Phone width: none of these pages overflows sideways.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, timezone_id="UTC")
    assert (
        phone.request.post(
            lite.base + "/ui/login",
            data=json.dumps({"token": TOKENS["viewer"]}),
            headers={"Content-Type": "application/json", "Origin": lite.base},
        ).status
        == 200
    )
    small = phone.new_page()
    for url, name in (
        (task + "#L120", "45-phone-log"),
        (runs, "46-phone-runs-dag"),
        (lite.base + "/runs?state=cancelled", "47-phone-runs-all"),
    ):
        small.goto(url)
        if "#L" not in url:
            expect(small.locator("table.runs")).to_be_visible(timeout=WAIT)
        else:
            expect(small.locator("#L120.hit")).to_be_visible(timeout=WAIT)
            small.fill("#log-q", "line 0000002 ")
            small.click("#log-search button[type=submit]")
            expect(small.locator("#log-hits li")).to_have_count(1, timeout=WAIT)
        _no_sideways_overflow(small)
        shot(small, name)
        small.screenshot(path=str(SHOTS / f"{name}-top.png"))  # what the phone shows first
    phone.close()
    context.close()
    # The API answers the same search, for the same viewer.
    request = urllib.request.Request(
        f"{lite.base}/api/v1/dags/big_log/runs/big/tasks/write/logs/1/search?q=line%200262144",
        headers={"Authorization": f"Bearer {TOKENS['viewer']}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        found = json.loads(response.read())
    assert [m["line"] for m in found["matches"]] == [LINES]
    assert found["size"] == len(EXPECTED)
