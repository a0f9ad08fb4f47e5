"""Web UI sessions and CSRF.

A session is a signed cookie (``leoflow_session``: HttpOnly, SameSite=Strict,
Secure over TLS) carrying a random session id, an expiry and an HMAC of the
SHA-256 of the bearer token it was made from — never the token itself. Each
request finds the configured token whose digest matches, so a token removed
from the tokens file (or given another role) takes effect at once. Without
tokens (Lite on loopback) every visitor gets an anonymous session, which the
CSRF token still needs.

The signing key is derived from ``token_signing_key`` when it is set (every API
replica then accepts every session), else from Lite's owner token (a session outlives
Lite's restart, as the token does); otherwise it is random per process and a restart
ends the sessions (an open Lite issues a new anonymous one on the next request).

Every state-changing call needs all of: a JSON body, an ``Origin`` equal to the
page's own origin, and an ``X-CSRF-Token`` header equal to HMAC(key, session id).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import HTTPException, Request, Response
from starlette.requests import cookie_parser

from leoflow.api.auth import Principal, Role
from leoflow.api.context import ApiContext

COOKIE = "leoflow_session"
SESSION_TTL = 12 * 3600
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True, slots=True)
class Session:
    sid: str
    binding: str  # hex HMAC of the token's digest; "" for an anonymous session
    expires: float
    principal: Principal
    csrf: str
    fresh: bool = False  # issued by this request: set the cookie on the response


class SessionKeys:
    def __init__(self, signing_key: str | None) -> None:
        if signing_key:
            self.key = hmac.new(
                signing_key.encode(), b"leoflow web ui session v1", "sha256"
            ).digest()
        else:
            self.key = secrets.token_bytes(32)
        self.revoked: dict[str, float] = {}

    def mac(self, *parts: str) -> str:
        return hmac.new(self.key, "\0".join(parts).encode(), hashlib.sha256).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def keys_of(ctx: ApiContext) -> SessionKeys:
    keys: SessionKeys | None = getattr(ctx, "_ui_session_keys", None)
    if keys is None:
        keys = SessionKeys(ctx.settings.token_signing_key or ctx.session_seed)
        ctx._ui_session_keys = keys  # type: ignore[attr-defined]
    return keys


def _encode(keys: SessionKeys, sid: str, binding: str, expires: float) -> str:
    payload = _b64(json.dumps({"s": sid, "b": binding, "e": int(expires)}).encode())
    return f"{payload}.{keys.mac('cookie', payload)}"


def _decode(keys: SessionKeys, value: str) -> tuple[str, str, float] | None:
    payload, _, sig = value.partition(".")
    if not sig or not hmac.compare_digest(sig, keys.mac("cookie", payload)):
        return None
    try:
        data = json.loads(_unb64(payload))
        return str(data["s"]), str(data["b"]), float(data["e"])
    except (ValueError, KeyError, TypeError):
        return None


def _principal_for(ctx: ApiContext, keys: SessionKeys, binding: str) -> Principal | None:
    if not ctx.auth.enabled:
        return Principal("anonymous", Role.ADMIN)
    found = None
    for digest, principal in ctx.auth.principals_by_digest():
        if hmac.compare_digest(keys.mac("token", digest.hex()), binding) and found is None:
            found = principal
    return found


def _new(ctx: ApiContext, keys: SessionKeys, binding: str, principal: Principal) -> Session:
    sid = secrets.token_urlsafe(18)
    return Session(
        sid, binding, time.time() + SESSION_TTL, principal, keys.mac("csrf", sid), fresh=True
    )


def _valid(ctx: ApiContext, raw: str | None) -> Session | None:
    keys = keys_of(ctx)
    decoded = _decode(keys, raw) if raw else None
    if decoded is None:
        return None
    sid, binding, expires = decoded
    if expires <= time.time() or sid in keys.revoked:
        return None
    principal = _principal_for(ctx, keys, binding)
    if principal is None:
        return None
    return Session(sid, binding, expires, principal, keys.mac("csrf", sid))


def from_cookie_header(ctx: ApiContext, cookie_header: str) -> Session | None:
    """The valid session a raw ``Cookie`` header carries, if any (for the guard,
    which sees headers only)."""
    return _valid(ctx, cookie_parser(cookie_header).get(COOKIE))


def current(request: Request, ctx: ApiContext) -> Session | None:
    """The request's session; a new anonymous one when auth is off; None to log in."""
    found = _valid(ctx, request.cookies.get(COOKIE))
    if found is not None:
        return found
    if not ctx.auth.enabled:
        return _new(ctx, keys_of(ctx), "", Principal("anonymous", Role.ADMIN))
    return None


def login(ctx: ApiContext, token: str) -> Session | None:
    principal = ctx.auth.authenticate(token)
    if principal is None:
        return None
    keys = keys_of(ctx)
    digest = hashlib.sha256(token.encode()).hexdigest()
    return _new(ctx, keys, keys.mac("token", digest), principal)


def logout(ctx: ApiContext, session: Session) -> None:
    keys = keys_of(ctx)
    now = time.time()
    for sid, until in list(keys.revoked.items()):
        if until < now:
            del keys.revoked[sid]
    keys.revoked[session.sid] = session.expires


def set_cookie(request: Request, response: Response, ctx: ApiContext, session: Session) -> None:
    response.set_cookie(
        COOKIE,
        _encode(keys_of(ctx), session.sid, session.binding, session.expires),
        max_age=int(session.expires - time.time()),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )


def own_origin(request: Request) -> str:
    host = request.headers.get("host", "")
    return f"{request.url.scheme}://{host}"


def check_same_origin(request: Request) -> None:
    """403 unless the browser says the call comes from this site's own pages."""
    origin = request.headers.get("origin")
    if origin is None or origin != own_origin(request):
        raise HTTPException(403, "cross-site request refused: Origin must be this site")
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise HTTPException(403, "cross-site request refused (Sec-Fetch-Site)")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HTTPException(415, "expected a JSON body (Content-Type: application/json)")


def check_csrf(request: Request, session: Session) -> None:
    token = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise HTTPException(403, "missing or stale CSRF token: reload the page")


def require(session: Session, role: Role) -> None:
    if session.principal.role < role:
        raise HTTPException(
            403,
            f"{session.principal.name!r} has role {session.principal.role.label}; "
            f"this needs {role.label}",
        )
