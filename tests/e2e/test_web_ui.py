"""The web UI in a real browser (Debian's chromium driven by Playwright) against a
real ``leoflow lite`` process with the example DAGs.

Screenshots of every page go to the test's temp dir and to /tmp/ui-shots/.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright_sync
from playwright.sync_api import expect

from leoflow.api import owner_token
from tests.e2e.conftest import LEOFLOW, REPO
from tests.support.net import free_port

CHROMIUM = shutil.which("chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path("/tmp/ui-shots")
TOKENS = {"viewer": "ui-viewer-token-1", "operator": "ui-operator-token-2"}
WAIT = 90_000  # ms: generous, the machine may be loaded


def _get(url: str, token: str | None = None) -> Any:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _post(url: str, body: Any, token: str | None = None) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class Lite:
    def __init__(
        self, env: dict[str, str], tmp_path: Path, extra: dict[str, str], dags: str
    ) -> None:
        self.dags = dags
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            **extra,
            "LEOFLOW_API_LISTEN": f"127.0.0.1:{self.port}",
            "LEOFLOW_SCHEDULER_POLL_INTERVAL": "0.2",
        }
        self.tmp_path = tmp_path
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0
        self.token: str | None = None
        self.login_link: str | None = None

    def start(self) -> None:
        out = open(self.tmp_path / f"lite-{self.starts}.out", "w")  # noqa: SIM115
        self.starts += 1
        self.proc = subprocess.Popen(
            [LEOFLOW, "lite", "--dags", self.dags],
            env=self.env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output = self.tmp_path / f"lite-{self.starts - 1}.out"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, output.read_text()
            link = re.search(r"leoflow web UI: (\S+)", output.read_text())
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=2).read()
            except OSError:
                time.sleep(0.2)
                continue
            if link is None and "LEOFLOW_API_TOKENS_FILE" not in self.env:
                time.sleep(0.2)  # serving; its one-time link is printed next
                continue
            # Without a tokens file, Lite's owner token: what its owner's CLI reads.
            self.token = owner_token.token_for(Path(self.env["LEOFLOW_HOME"]), self.base)
            self.login_link = link.group(1) if link else None
            return
        raise AssertionError("leoflow lite did not start serving")

    def log_in(self, context: Any) -> None:
        """Log a browser context in as Lite's owner, with the token from its file."""
        answer = context.request.post(
            self.base + "/ui/login",
            data=json.dumps({"token": self.token}),
            headers={"Content-Type": "application/json", "Origin": self.base},
        )
        assert answer.status == 200, answer.text()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def make_lite(env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Lite]]:
    made: list[Lite] = []

    def make(dags: str = "examples/dags", **extra: str) -> Lite:
        lite = Lite(env, tmp_path, extra, dags)
        made.append(lite)
        lite.start()
        return lite

    yield make
    for lite in made:
        lite.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    assert CHROMIUM, "chromium is not installed (apt-get install chromium)"
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shot(tmp_path: Path) -> Callable[[Any, str], None]:
    folder = tmp_path / "shots"
    folder.mkdir()
    SHOTS.mkdir(exist_ok=True)

    def take(page: Any, name: str) -> None:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        shutil.copy(path, SHOTS / path.name)

    return take


def write_tokens(folder: Path) -> Path:
    """A tokens file with a user of each role in TOKENS (named ROLE-user)."""
    tokens = folder / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        + "".join(
            f"  - {{name: {role}-user, role: {role}, "
            f"sha256: {hashlib.sha256(tok.encode()).hexdigest()}}}\n"
            for role, tok in TOKENS.items()
        )
    )
    return tokens


def _runs(lite: Lite, dag_id: str, token: str | None = None) -> list[dict[str, Any]]:
    url = f"{lite.base}/api/v1/dags/{dag_id}/runs"
    runs: list[dict[str, Any]] = _get(url, token or lite.token)["runs"]
    return runs


def test_trigger_watch_log_clear_rerun_and_refusals(
    make_lite: Callable[..., Lite], browser: Any, shot: Callable[[Any, str], None]
) -> None:
    lite = make_lite()
    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, timezone_id="Europe/Berlin"
    )
    page = context.new_page()
    page.goto(lite.base + "/")
    assert "/login" in page.url  # Lite without tokens still needs its owner's
    assert lite.login_link is not None
    page.goto(lite.login_link)  # the one-time link `leoflow lite` printed
    page.wait_for_url(lite.base + "/")
    assert page.locator("table.dags tbody tr").count() == 2
    assert page.locator("td.dag-id a", has_text="nightly_sales").is_visible()
    shot(page, "01-dags-empty")

    # Trigger nightly_sales from the browser; the conf editor refuses bad JSON first.
    page.click("td.dag-id a:text('nightly_sales')")
    page.wait_for_selector("#graph svg g.node")
    assert page.locator("#graph g.node").count() == 8
    page.evaluate("window.__sameDocument = 'yes'")
    page.click("#trigger-open")
    page.fill("#conf", '{"day": ')
    assert "Not valid JSON" in page.inner_text("#conf-error")
    assert page.is_disabled("#trigger-submit")
    page.fill("#conf", "[1, 2]")
    assert "must be a JSON object" in page.inner_text("#conf-error")
    page.fill("#conf", '{"day": "2024-01-31"}')
    assert page.is_enabled("#trigger-submit")
    shot(page, "02-trigger-dialog")
    page.click("#trigger-submit")
    # Every node turns green without a reload.
    expect(page.locator("#graph g.node[data-state=success]")).to_have_count(8, timeout=WAIT)
    assert page.evaluate("window.__sameDocument") == "yes"
    assert page.locator("#graph g.node.s-success text.ic").first.text_content() == "\u2713"
    runs = _runs(lite, "nightly_sales")
    assert [(r["state"], r["conf"]) for r in runs] == [("success", {"day": "2024-01-31"})]
    page.wait_for_selector("table.grid tbody a.sq.s-success")
    shot(page, "03-dag-graph-success")

    # The failing DAG: open the failed task's log, clear it, watch it run again.
    page.goto(lite.base + "/dags/failing_report")
    page.click("#trigger-open")
    page.click("#trigger-submit")
    page.wait_for_selector("#graph g.node[data-task=extract][data-state=failed]", timeout=WAIT)
    page.wait_for_selector(
        "#graph g.node[data-task=report][data-state=upstream_failed]", timeout=WAIT
    )
    shot(page, "04-dag-graph-failed")
    expect(page.locator(".run-pick .badge")).to_contain_text("failed", timeout=WAIT)
    page.click("#graph a.node-link[data-task=extract]")
    page.wait_for_selector("#log-text:has-text('connection refused')", timeout=WAIT)
    assert "exited with code 2" in page.inner_text(".outcome")
    assert page.locator(".tries a").count() == 2
    # Times are shown in the browser's time zone, with UTC on hover.
    started = page.locator(".facts time").first
    assert started.get_attribute("title").endswith("Z (UTC)")
    assert "GMT+1" in started.inner_text() or "CET" in started.inner_text()
    shot(page, "05-task-failed-log")

    page.check("#clear-downstream")
    page.click("#clear-task")
    # Cleared with its downstream: two more tries of extract, and they fail again.
    page.wait_for_selector(".tries a:text('try 3')", timeout=WAIT)
    expect(page.locator(".facts dd").first).to_have_text("4 of 4", timeout=WAIT)
    expect(page.locator("h1 .badge")).to_contain_text("failed", timeout=WAIT)
    run_id = _runs(lite, "failing_report")[0]["run_id"]
    tis = _get(f"{lite.base}/api/v1/dags/failing_report/runs/{run_id}/tasks", lite.token)[
        "task_instances"
    ]
    by_task = {t["task_id"]: (t["state"], t["try_number"]) for t in tis}
    assert by_task == {
        "extract": ("failed", 4),
        "report": ("upstream_failed", 0),
        "unrelated": ("success", 1),
    }
    page.click(".tries a:text('try 4')")
    page.wait_for_selector("#log-text:has-text('connection refused')", timeout=WAIT)

    page.goto(f"{lite.base}/dags/failing_report/runs/{run_id}")
    assert page.locator("table.tis tbody tr").count() == 3
    shot(page, "06-run")

    # A pool with no slots: the waiting page and the task say why, with numbers.
    page.goto(lite.base + "/pools")
    page.fill("#slots-warehouse", "0")
    page.click("form.resize[data-pool=warehouse] button")
    page.wait_for_selector("td.occ:has-text('0 of 0 used')", timeout=WAIT)
    _post(f"{lite.base}/api/v1/dags/nightly_sales/runs", {"run_id": "starved"}, lite.token)
    page.goto(lite.base + "/waiting")
    group = page.locator(".wait-group", has_text="pool warehouse is too small")
    expect(group.locator(".count")).to_have_text("3", timeout=WAIT)
    shot(page, "07-waiting")
    page.goto(f"{lite.base}/dags/nightly_sales/runs/starved/tasks/load_orders")
    expect(page.locator(".why-message")).to_have_text(
        "pool warehouse has 0 slots in all; this task needs 1 and cannot run until the pool grows"
    )
    assert page.inner_text("#log-status") == "No try has started yet."
    shot(page, "07b-task-waiting")
    # Grow the pool from another tab; this one, opened before the task's first try,
    # shows that try's log when it starts, without a reload.
    page.evaluate("window.__sameDocument = 'waiting'")
    admin = context.new_page()
    admin.goto(lite.base + "/pools")
    admin.fill("#slots-warehouse", "3")
    admin.click("form.resize[data-pool=warehouse] button")
    admin.wait_for_selector("td.occ:has-text('of 3 used')", timeout=WAIT)
    assert {p["name"]: p["slots"] for p in _get(lite.base + "/api/v1/pools", lite.token)["pools"]}[
        "warehouse"
    ] == 3
    shot(admin, "08-pools")
    admin.close()
    page.wait_for_selector("#log-text:has-text('loading orders into analytics')", timeout=WAIT)
    assert page.evaluate("window.__sameDocument") == "waiting"
    shot(page, "07c-task-log-after-waiting")
    page.goto(lite.base + "/dags/nightly_sales?run=starved")
    expect(page.locator("#graph g.node[data-state=success]")).to_have_count(8, timeout=WAIT)

    page.goto(lite.base + "/")
    page.wait_for_selector("td.squares a.sq.s-failed")
    shot(page, "09-dags")
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    lite.log_in(phone)
    small = phone.new_page()
    small.goto(lite.base + "/dags/nightly_sales")
    small.wait_for_selector("#graph g.node")
    shot(small, "10-phone-dag")
    small.goto(lite.base + "/")
    shot(small, "11-phone-dags")
    phone.close()

    # A cross-site form post (another origin's page) is refused and changes nothing.
    before = len(_runs(lite, "nightly_sales"))
    page.goto(_evil_site(lite.base))
    page.wait_for_url(lite.base + "/ui/actions/trigger", timeout=WAIT)
    # Refused by the API's guard before the UI's own check sees it.
    assert "cross-origin request from Origin" in page.inner_text("body")
    assert len(_runs(lite, "nightly_sales")) == before

    # The server restarts under an open page: it reconnects and shows what changed.
    page.goto(lite.base + "/dags/nightly_sales")
    page.wait_for_selector("#live:not(.down)")
    page.evaluate("window.__sameDocument = 'still'")
    lite.stop()
    page.wait_for_selector("#live.down", timeout=WAIT)
    lite.start()
    _post(f"{lite.base}/api/v1/dags/nightly_sales/runs", {"run_id": "after_restart"}, lite.token)
    page.wait_for_selector("#selected-run:text('after_restart')", timeout=WAIT)
    expect(page.locator("#graph g.node[data-state=success]")).to_have_count(8, timeout=WAIT)
    assert page.evaluate("window.__sameDocument") == "still"
    context.close()


def _evil_site(target: str) -> str:
    """A page on another origin that posts a form to the UI as soon as it loads."""
    html = (
        f'<form id="f" method="post" action="{target}/ui/actions/trigger">'
        '<input name="dag_id" value="nightly_sales"></form>'
        "<script>document.getElementById('f').submit()</script>"
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # localhost and 127.0.0.1 are different origins.
    return f"http://localhost:{server.server_address[1]}/evil.html"


def test_a_viewer_sees_no_actions_and_is_refused_when_it_forges_one(
    make_lite: Callable[..., Lite],
    browser: Any,
    shot: Callable[[Any, str], None],
    tmp_path: Path,
) -> None:
    lite = make_lite(LEOFLOW_API_TOKENS_FILE=str(write_tokens(tmp_path)))
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(lite.base + "/dags/nightly_sales")
    assert "/login" in page.url
    page.fill("#token", "not-a-token")
    page.click("button[type=submit]")
    page.wait_for_selector("#login-error:text('not valid')")
    shot(page, "20-login")
    page.fill("#token", TOKENS["viewer"])
    page.click("button[type=submit]")
    page.wait_for_url(lite.base + "/dags/nightly_sales")
    page.wait_for_selector("#graph g.node")
    (cookie,) = context.cookies()
    assert cookie["name"] == "leoflow_session"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert TOKENS["viewer"] not in cookie["value"]
    assert page.evaluate("document.cookie") == ""
    assert page.locator("#trigger-open").count() == 0
    assert page.locator("#pause-btn").count() == 0
    assert "viewer-user" in page.inner_text("header")
    shot(page, "21-viewer-dag")

    forged = page.evaluate(
        """async () => {
          const csrf = document.querySelector('meta[name="csrf-token"]').content;
          const r = await fetch('/ui/actions/trigger', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrf},
            body: JSON.stringify({dag_id: 'nightly_sales'})});
          return [r.status, (await r.json()).detail];
        }"""
    )
    assert forged[0] == 403 and "needs operator" in forged[1], forged
    assert _runs(lite, "nightly_sales", TOKENS["viewer"]) == []

    # An operator's session without its CSRF token is refused too; with it, it works.
    op = browser.new_context(viewport={"width": 1280, "height": 800})
    op_page = op.new_page()
    op_page.goto(lite.base + "/login?next=%2Fdags%2Fnightly_sales")
    op_page.fill("#token", TOKENS["operator"])
    op_page.click("button[type=submit]")
    op_page.wait_for_selector("#trigger-open")
    no_csrf = op_page.evaluate(
        """async () => (await fetch('/ui/actions/trigger', {method: 'POST',
            headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({dag_id: 'nightly_sales'})})).status"""
    )
    assert no_csrf == 403
    assert _runs(lite, "nightly_sales", TOKENS["viewer"]) == []
    op_page.click("#trigger-open")
    op_page.click("#trigger-submit")
    op_page.wait_for_selector("#selected-run", timeout=WAIT)
    assert len(_runs(lite, "nightly_sales", TOKENS["viewer"])) == 1
    # The viewer's page follows it live, and the viewer reads the task's log (stored
    # masked, as every role sees it).
    page.wait_for_selector("#selected-run", timeout=WAIT)
    page.click("#graph a.node-link[data-task=extract_orders]")
    page.wait_for_selector("#log-text .ll", timeout=WAIT)
    assert page.locator("#clear-task").count() == 0
    shot(page, "22-viewer-task")
    op.close()
    context.close()
