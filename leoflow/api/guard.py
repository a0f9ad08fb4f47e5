"""The request guard: a plain ASGI middleware every HTTP request passes before any
route sees it — the API's routers and anything mounted on the app later (a web UI at
``/``) alike, because it wraps the whole application.

In order, each check answering with a JSON ``{"detail": ...}`` that names the setting:

1. ``Host`` must be an allowed host (400). Defeats DNS rebinding: a page on
   ``evil.example`` whose name now resolves to 127.0.0.1 still sends
   ``Host: evil.example``. Matched on the name only, as Django's ``ALLOWED_HOSTS``
   and Jupyter's local-host check do: the port in ``Host`` is the one the browser
   connected to, which an attacker cannot choose, so checking it adds nothing and
   would break a reverse proxy on another port. An entry ``name:port`` pins a port.
   Allowed: 127.0.0.1, localhost, [::1], the address ``api_listen`` names (not a
   wildcard), and ``api_allowed_hosts``.
2. A state-changing request (POST, PUT, PATCH, DELETE) carrying an ``Origin`` that is
   neither this server's own origin nor an allowed origin, or ``Sec-Fetch-Site:
   cross-site`` / ``same-site`` (another port of the same host is another origin)
   without an allowed ``Origin``, is refused (403). Browsers always send these on
   such requests; the CLI (httpx) sends neither and is not affected.
3. With tokens configured, a request without a valid bearer token is answered 401
   from its headers, before a byte of its body is read. Paths of an app with its own
   session (the web UI, ``session_gate``) are asked instead: a UI write without a
   valid session cookie is 401 here, its body unread.
4. A body must carry an accepted ``Content-Type`` (415): YAML media types for a DAG
   document, ``application/json`` elsewhere. ``text/plain`` (the one a cross-site
   form can send without a CORS preflight) is never accepted.
5. A body is bounded (413): a ``Content-Length`` above the route's limit is refused
   at once; a chunked body is counted while it arrives and refused at the limit, so
   at most the limit is ever held in memory (see ``DISCARD_LIMIT`` for what happens
   to the rest).
6. A JSON body is strict (422): no ``NaN``/``Infinity`` (Python's json accepts them)
   and nesting bounded; and every string and key in it, the path and every query
   parameter are text a store can hold and a response can carry (400 naming the field:
   no lone UTF-16 surrogate, no NUL, no percent-encoded bytes that are not UTF-8), so
   no input is stored that would break the listings serving it.

/healthz, /readyz and /metrics (GET/HEAD) are exempt from the Host check: kubelet
probes and Prometheus address the pod by IP, so their ``Host`` is an IP no allow-list
could name in advance. They are open (no token) and read-only anyway, so an answer
read through a rebound name tells nothing a direct request would not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from leoflow.api.auth import Auth
from leoflow.api.hosts import (
    DEFAULT_PORTS,
    HOSTS_SETTING,
    LOOPBACK_HOSTS,
    host_rules,
    listen_host,
    parse_origin,
    split_host,
)
from leoflow.api.strict_json import check_strict_json
from leoflow.api.targets import unstorable_target
from leoflow.settings import Settings

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
JSON_TYPES = ("application/json",)
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Open without a token (the OpenAPI document and its viewer, the probes, the scrape).
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"})
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# The (method, path) whose body is a DAG document (YAML, the larger limit); every other
# request takes JSON. Paths without parameters, so matched before routing.
DAG_DOCUMENT_ROUTES = frozenset({("POST", "/api/v1/dags")})

ORIGINS_SETTING = "api_allowed_origins (LEOFLOW_API_ALLOWED_ORIGINS)"
BODY_LIMIT_SETTING = "api_body_limit (LEOFLOW_API_BODY_LIMIT)"
DAG_LIMIT_SETTING = "api_dag_body_limit (LEOFLOW_API_DAG_BODY_LIMIT)"
_NO_TOKEN = "a valid bearer token is required (Authorization: Bearer TOKEN)"
_NO_SESSION = "log in first: this needs a valid web UI session"
# (method, path, headers) -> None: not a session path, the bearer check applies;
# True/False: the session's app takes / refuses the request.
SessionGate = Callable[[str, str, Mapping[str, str]], "bool | None"]


def _headers(scope: Scope) -> dict[str, str]:
    # Latin-1 is what ASGI servers decode header bytes with; a repeated header keeps
    # its first value (a second Host is an attack or a broken client either way).
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        out.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
    return out


async def _answer(
    send: Send, status: int, detail: str, extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# A refused request's unread body: when its Content-Length says it is at most this,
# the server reads it on and discards it (uvicorn does, in constant memory, once the
# answer is sent) so that a client that sends its whole body before reading — httpx,
# so the CLI — gets the answer instead of a connection reset. A bigger or chunked body
# is not read on: the answer says ``Connection: close`` and the connection ends.
DISCARD_LIMIT = 16 * 1024 * 1024
_CLOSE = ((b"connection", b"close"),)


def _after_refusal(length: int, chunked: bool) -> tuple[tuple[bytes, bytes], ...]:
    return _CLOSE if chunked or length > DISCARD_LIMIT else ()


class RequestGuard:
    """See the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        auth: Auth,
        session_gate: SessionGate = lambda method, path, headers: None,
    ) -> None:
        self.app = app
        # The paths of an app that authenticates by its own session (the web UI's
        # cookie): it says, from the headers, whether it takes the request.
        self.session_gate = session_gate
        self.settings = settings
        self.auth = auth
        self.hosts = host_rules((*settings.api_allowed_hosts, *listen_host(settings.api_listen)))
        self.origins = frozenset(
            o for o in (parse_origin(v) for v in settings.api_allowed_origins) if o is not None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = str(scope["method"]).upper()
        path = str(scope["path"])
        headers = _headers(scope)
        length_text = headers.get("content-length")
        chunked = "transfer-encoding" in headers
        if length_text is not None and not (
            length_text.isascii() and length_text.strip().isdigit()
        ):
            await _answer(send, 400, f"Content-Length {length_text[:40]!r} is not a number", _CLOSE)
            return
        length = int(length_text) if length_text is not None else 0
        has_body = chunked or length > 0
        after = _after_refusal(length, chunked)

        host = split_host(headers.get("host", ""))
        probe = path in PROBE_PATHS and method in ("GET", "HEAD")
        if not probe and not self._host_allowed(host):
            await _answer(send, 400, self._host_refusal(headers), after)
            return

        if method in STATE_CHANGING:
            refused = self._cross_origin(headers, host)
            if refused is not None:
                await _answer(send, 403, refused, after)
                return

        refused = self._unauthenticated(method, path, headers)
        if refused is not None:
            bearer = ((b"www-authenticate", b"Bearer"),) if refused is _NO_TOKEN else ()
            await _answer(send, 401, refused, (*bearer, *after))
            return

        refused = unstorable_target(scope)
        if refused is not None:
            await _answer(send, 400, refused, after)
            return

        if not has_body:
            await self.app(scope, receive, send)
            return

        document = (method, path.rstrip("/") or "/") in DAG_DOCUMENT_ROUTES
        accepted = YAML_TYPES if document else JSON_TYPES
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media not in accepted:
            await _answer(
                send,
                415,
                f"Content-Type {media or '(none)'!r} is not accepted here; send the body as "
                + (" or ".join(accepted)),
                after,
            )
            return

        limit = self.settings.api_dag_body_limit if document else self.settings.api_body_limit
        setting = DAG_LIMIT_SETTING if document else BODY_LIMIT_SETTING
        too_large = f"the request body is over the limit of {limit} bytes ({setting})"
        if length > limit:
            await _answer(send, 413, too_large, after)
            return
        try:
            body = await _read_body(receive, limit)
        except _ClientGone:
            return
        if body is None:  # chunked, or a Content-Length that lied
            await _answer(send, 413, too_large, _CLOSE)
            return
        if not document:
            refusal = check_strict_json(body, self.settings.api_json_max_depth)
            if refusal is not None:
                await _answer(send, refusal.status, refusal.detail)
                return
        await self.app(scope, _replay(body, receive), send)

    def _host_allowed(self, host: tuple[str, int | None] | None) -> bool:
        return host is not None and any(rule.allows(*host) for rule in self.hosts)

    def _host_refusal(self, headers: dict[str, str]) -> str:
        shown = headers.get("host", "")[:100]
        return (
            f"Host {shown!r} is not an allowed host of this API: add it to "
            f"{HOSTS_SETTING} (allowed by default: {', '.join(LOOPBACK_HOSTS)})"
        )

    def _unauthenticated(self, method: str, path: str, headers: dict[str, str]) -> str | None:
        """Why the request is refused for want of credentials (the 401's detail), or None."""
        if not self.auth.enabled or path in OPEN_PATHS:
            return None
        by_session = self.session_gate(method, path, headers)
        if by_session is not None:
            return None if by_session else _NO_SESSION
        scheme, _, token = headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        return None if self.auth.authenticate(token or None) is not None else _NO_TOKEN

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket (none today; a UI may add one) gets the Host, Origin and token
        checks: a browser opens one cross-site without any preflight."""
        headers = _headers(scope)
        host = split_host(headers.get("host", ""))
        # A close reason holds at most 123 bytes: short ones that name the setting.
        refused = None
        if not self._host_allowed(host):
            refused = "Host not allowed: LEOFLOW_API_ALLOWED_HOSTS"
        elif self._cross_origin(headers, host) is not None:
            refused = "Origin not allowed: LEOFLOW_API_ALLOWED_ORIGINS"
        elif self._unauthenticated("GET", str(scope["path"]), headers) is not None:
            refused = "a valid bearer token is required"
        if refused is None:
            await self.app(scope, receive, send)
            return
        await receive()  # websocket.connect; a close before accept is an HTTP 403
        await send({"type": "websocket.close", "code": 1008, "reason": refused})

    def _cross_origin(
        self, headers: dict[str, str], host: tuple[str, int | None] | None
    ) -> str | None:
        origin_text = headers.get("origin")
        site = headers.get("sec-fetch-site", "").strip().lower()
        origin = parse_origin(origin_text) if origin_text is not None else None
        listed = origin is not None and origin in self.origins
        if origin_text is not None and not listed:
            same = (
                origin is not None
                and host is not None
                and origin[1] == host[0]
                and origin[2] == (host[1] if host[1] is not None else DEFAULT_PORTS[origin[0]])
            )
            if not same or site in ("cross-site", "same-site"):
                return (
                    f"cross-origin request from Origin {origin_text[:100]!r} refused: "
                    f"add that origin to {ORIGINS_SETTING} to allow it"
                )
        if site in ("cross-site", "same-site") and not listed:
            return (
                f"cross-origin request (Sec-Fetch-Site: {site}) refused: only an Origin "
                f"listed in {ORIGINS_SETTING} may make it"
            )
        return None


class _ClientGone(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as more than ``limit`` bytes have arrived;
    _ClientGone if the client disconnects first (nobody to answer)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once, then the real channel (a streamed response waits on it to see
    the client disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
