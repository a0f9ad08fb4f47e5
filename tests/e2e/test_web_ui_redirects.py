"""After logging in, a real browser (Debian's chromium via Playwright) is sent only to a
path of the UI's own origin, whatever ``/login?next=`` says: every request it makes is
recorded, and one to any other host fails the test (and is not sent)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from tests.e2e.test_web_ui import Lite, browser, make_lite  # noqa: F401

TOKEN = "redirect-viewer-token-1"
# Each as a browser would send it in the query (the server sees it decoded once).
HOSTILE = [
    "/\\evil.example/",
    "//evil.example/",
    "/\\/evil.example",
    "\\\\evil.example",
    "https://evil.example/",
    "/\t/evil.example",
    "\t//evil.example",
    "/%2F%2Fevil.example",
    "/%5Cevil.example",
    "/%252F%252Fevil.example",
    "javascript:location='http://evil.example/'",
    " //evil.example",
]


def test_login_next_never_leaves_the_origin(
    make_lite: Callable[..., Lite],  # noqa: F811
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    tokens.write_text(f"tokens:\n  - {{name: v, role: viewer, sha256: {digest}}}\n")
    lite = make_lite(LEOFLOW_API_TOKENS_FILE=str(tokens))
    ours = urlsplit(lite.base).netloc
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    foreign: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).netloc != ours:
            foreign.append(url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", guard)
    page = context.new_page()
    for target in HOSTILE:
        page.goto(f"{lite.base}/login?next={quote(target, safe='')}")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: not url.startswith(lite.base + "/login"), timeout=90_000)
        assert page.url == lite.base + "/", (target, page.url)
        assert foreign == [], (target, foreign)
    # A path of this origin is where the login goes.
    page.goto(f"{lite.base}/login?next={quote('/waiting?x=a%20b', safe='')}")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(lite.base + "/waiting?x=a%20b", timeout=90_000)
