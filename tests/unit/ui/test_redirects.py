"""The one check every redirect target the web UI takes from a request goes through."""

from __future__ import annotations

import pytest

from leoflow.api.ui.redirects import same_origin_path

HOSTILE = [
    "//evil.example/",
    "/\\evil.example/",
    "\\\\evil.example",
    "/\\/evil.example",
    "https://evil.example/",
    "HTTPS:evil.example",
    "javascript:alert(1)",
    "data:text/html,x",
    "evil.example",
    "\t//evil.example",
    " //evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/\r\n/evil.example",
    "/%09/evil.example",
    "/%0a/evil.example",
    "/%2F%2Fevil.example",
    "/%2f/evil.example",
    "/%5Cevil.example",
    "/%5c%5cevil.example",
    "/%252F%252Fevil.example",
    "/%25252F%25252Fevil.example",
    "/.%2F/evil.example",
    "/a/..//evil.example",
    "/./evil",
    "/@evil.example",
    "/dags\\..\\..\\evil",
    "/\u200b/evil.example",
    "/\u2028/evil.example",
    "/\x00/evil",
    "/%00/evil",
    "/%ff",
    "/" + "a" * 3000,
    "",
]
SAFE = [
    "/",
    "/dags/nightly_sales",
    "/dags/x?mapped=a%20b",
    "/dags/%C3%A9/runs/manual__2026-12-07T00%3A49%3A07%2B00%3A00_ab",
    "/dags/x/runs/a%40b",
    "/dags/x?q=x%40y#top",
    "/waiting",
]


@pytest.mark.parametrize("target", HOSTILE)
def test_a_hostile_target_becomes_the_default(target: str) -> None:
    assert same_origin_path(target) == "/"
    assert same_origin_path(target, "/pools") == "/pools"


@pytest.mark.parametrize("target", SAFE)
def test_a_path_of_this_origin_is_kept(target: str) -> None:
    assert same_origin_path(target) == target
