"""What the request guard asks the web UI before a request reaches it.

Outside ``/api`` the UI authenticates by its session cookie, not a bearer token.
A page (GET) goes through without one: the page itself shows the login form. A
write (POST, PUT, PATCH, DELETE) needs a valid session already in the guard,
so one without is refused from its headers before a byte of its body is read —
except ``/ui/login``, whose body carries the token that makes the session.
CSRF, same-origin and role checks stay in the routes (``routes.act``).
"""

from __future__ import annotations

from collections.abc import Mapping

from leoflow.api.context import ApiContext
from leoflow.api.ui import session

# The one UI write made before there is a session.
OPEN_WRITES = frozenset({"/ui/login"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def is_ui_path(path: str) -> bool:
    return not (path == "/api" or path.startswith("/api/"))


class UiGate:
    """``admits(method, path, headers)``: None when the path is not the UI's (the
    guard's bearer check applies), else whether the UI takes the request."""

    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx

    def __call__(self, method: str, path: str, headers: Mapping[str, str]) -> bool | None:
        if not is_ui_path(path):
            return None
        if method not in _WRITES or path in OPEN_WRITES:
            return True
        return session.from_cookie_header(self.ctx, headers.get("cookie", "")) is not None
