"""Agent credentials: single-use bootstrap tickets and per-task session tokens.

A *ticket* is what a task pod's spec carries. It is random, single-use and
short-lived, and the store keeps only its SHA-256 (a ticket has 256 bits of
entropy, so an unsalted hash is enough: nobody can guess a preimage).

A *session token* is what an agent gets for its ticket. It lives only in the
agent's memory, names one (task instance, try), and is an HMAC-SHA256 over its
claims with a key from configuration, so any scheduler replica can verify it
without a lookup:

    v1.<base64url(json [ti_pk, try_number, issued_at, expires_at, nonce])>.<base64url(mac)>

The MAC covers the text before the last dot, version included. Pure: stdlib only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass

TOKEN_VERSION = "v1"
MIN_KEY_BYTES = 16
# Far above any token we issue; bounds the work an attacker's garbage costs us.
MAX_TOKEN_CHARS = 1024
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class InvalidToken(Exception):
    """A session token was refused; ``reason`` is malformed, bad signature or expired."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SessionClaims:
    ti_pk: int
    try_number: int
    issued_at: float
    expires_at: float
    nonce: str


def issue_ticket() -> tuple[str, str]:
    """A new ticket and its hash. Store the hash; hand the ticket to the pod, once."""
    ticket = secrets.token_urlsafe(32)
    return ticket, hash_ticket(ticket)


def hash_ticket(ticket: str) -> str:
    return hashlib.sha256(ticket.encode("utf-8")).hexdigest()


def new_claims(ti_pk: int, try_number: int, *, now: float, ttl: float) -> SessionClaims:
    """Claims for a fresh session of (ti_pk, try_number), valid for ``ttl`` seconds."""
    return SessionClaims(ti_pk, try_number, now, now + ttl, secrets.token_urlsafe(9))


def sign_session(claims: SessionClaims, key: bytes) -> str:
    _check_key(key)
    payload = json.dumps(
        [claims.ti_pk, claims.try_number, claims.issued_at, claims.expires_at, claims.nonce],
        separators=(",", ":"),
    ).encode("ascii")
    body = f"{TOKEN_VERSION}.{_b64encode(payload)}"
    return f"{body}.{_b64encode(_mac(key, body))}"


def verify_session(token: str, key: bytes, now: float) -> SessionClaims:
    """The claims of a token we signed with ``key`` that has not expired at ``now``.

    Raises InvalidToken otherwise. The signature is checked (in constant time)
    before the payload is parsed, so unsigned input never reaches the JSON parser.
    """
    claims = _parse_claims(signed_payload(token, key, TOKEN_VERSION))
    if now >= claims.expires_at:
        raise InvalidToken("expired")
    return claims


def signed_payload(token: str, key: bytes, version: str) -> bytes | None:
    """The payload of ``<version>.<payload>.<mac>`` once its MAC under ``key`` is
    checked (constant time); InvalidToken when the token is malformed or forged."""
    _check_key(key)
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise InvalidToken("malformed")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != version:
        raise InvalidToken("malformed")
    signature = _b64decode(parts[2])
    body = f"{parts[0]}.{parts[1]}"
    if signature is None or not hmac.compare_digest(signature, _mac(key, body)):
        raise InvalidToken("bad signature")
    return _b64decode(parts[1])


def _parse_claims(payload: bytes | None) -> SessionClaims:
    try:
        fields = json.loads(payload) if payload is not None else None
    except ValueError:
        fields = None
    if not isinstance(fields, list) or len(fields) != 5:
        raise InvalidToken("malformed")
    ti_pk, try_number, issued_at, expires_at, nonce = fields
    if not (
        _is_int(ti_pk)
        and _is_int(try_number)
        and _is_number(issued_at)
        and _is_number(expires_at)
        and isinstance(nonce, str)
    ):
        raise InvalidToken("malformed")
    return SessionClaims(ti_pk, try_number, float(issued_at), float(expires_at), nonce)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the session signing key must be at least {MIN_KEY_BYTES} bytes")


def _mac(key: bytes, body: str) -> bytes:
    return hmac.digest(key, body.encode("ascii"), "sha256")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes | None:
    """Strict unpadded base64url: one encoding per byte string, or None."""
    if not _B64URL.fullmatch(text):
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return data if _b64encode(data) == text else None
