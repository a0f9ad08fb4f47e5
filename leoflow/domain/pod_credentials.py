"""A warm pod's own credential (ADR 0053): the pod session token.

A warm pod's spec carries a single-use ticket, as a task pod's does; its agent
exchanges it for a *pod session token*, which names the pod, its DAG and its pod
shape, and authorizes exactly one thing: asking for the next task of that DAG and
shape. Each task it is given comes as that task's own ticket, exchanged for the
task's own session token as in any pod, so a pod token reads no task, secret or log.

    p1.<base64url(json [pod, dag_id, shape, issued_at, expires_at, nonce])>.<base64url(mac)>

The prefix differs from a task token's (``v1``), so neither verifies as the other.
Signed with the same key, so any replica (a new leader) can verify it.
"""

from __future__ import annotations

import json
import secrets
from typing import NamedTuple

from leoflow.domain.credentials import (
    InvalidToken,
    _b64encode,
    _check_key,
    _mac,
    signed_payload,
)

POD_TOKEN_VERSION = "p1"


class PodClaims(NamedTuple):
    """What a pod token says: the pod, its DAG and shape, and when it expires."""

    pod: str
    dag_id: str
    shape: str
    issued_at: float
    expires_at: float
    nonce: str


def new_pod_claims(pod: str, dag_id: str, shape: str, *, now: float, ttl: float) -> PodClaims:
    return PodClaims(pod, dag_id, shape, now, now + ttl, secrets.token_urlsafe(9))


def sign_pod_session(claims: PodClaims, key: bytes) -> str:
    _check_key(key)
    payload = json.dumps(
        [
            claims.pod,
            claims.dag_id,
            claims.shape,
            claims.issued_at,
            claims.expires_at,
            claims.nonce,
        ],
        separators=(",", ":"),
    ).encode("utf-8")
    body = f"{POD_TOKEN_VERSION}.{_b64encode(payload)}"
    return f"{body}.{_b64encode(_mac(key, body))}"


def is_pod_token(token: str) -> bool:
    return isinstance(token, str) and token.startswith(POD_TOKEN_VERSION + ".")


def verify_pod_session(token: str, key: bytes, now: float) -> PodClaims:
    """The claims of a pod token we signed that has not expired; InvalidToken otherwise."""
    payload = signed_payload(token, key, POD_TOKEN_VERSION)
    try:
        fields = json.loads(payload) if payload is not None else None
    except ValueError:
        fields = None
    if (
        not isinstance(fields, list)
        or len(fields) != 6
        or not all(isinstance(f, str) for f in (*fields[:3], fields[5]))
        or not all(isinstance(f, int | float) and not isinstance(f, bool) for f in fields[3:5])
    ):
        raise InvalidToken("malformed")
    claims = PodClaims(
        fields[0], fields[1], fields[2], float(fields[3]), float(fields[4]), fields[5]
    )
    if now >= claims.expires_at:
        raise InvalidToken("expired")
    return claims
