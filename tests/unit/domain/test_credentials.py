from __future__ import annotations

import base64
import json

import pytest

from leoflow.domain.credentials import (
    InvalidToken,
    SessionClaims,
    hash_ticket,
    issue_ticket,
    new_claims,
    sign_session,
    verify_session,
)

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
NOW = 1_800_000_000.0


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_ticket_is_random_and_only_its_hash_is_returned_alongside() -> None:
    ticket, digest = issue_ticket()
    other, other_digest = issue_ticket()
    assert ticket != other and digest != other_digest
    assert len(ticket) >= 43  # 32 random bytes
    assert digest == hash_ticket(ticket)
    assert ticket not in digest and len(digest) == 64


def test_hash_ticket_is_sha256_hex() -> None:
    assert hash_ticket("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_round_trip() -> None:
    claims = SessionClaims(7, 2, NOW, NOW + 60, "n1")
    assert verify_session(sign_session(claims, KEY), KEY, NOW + 59.9) == claims


def test_new_claims_are_bound_and_unique() -> None:
    a = new_claims(7, 2, now=NOW, ttl=60)
    b = new_claims(7, 2, now=NOW, ttl=60)
    assert (a.ti_pk, a.try_number, a.issued_at, a.expires_at) == (7, 2, NOW, NOW + 60)
    assert a.nonce != b.nonce
    assert sign_session(a, KEY) != sign_session(b, KEY)


def test_expired() -> None:
    token = sign_session(SessionClaims(7, 2, NOW, NOW + 60, "n"), KEY)
    with pytest.raises(InvalidToken) as exc:
        verify_session(token, KEY, NOW + 60)
    assert exc.value.reason == "expired"


def test_other_key_is_a_bad_signature() -> None:
    token = sign_session(SessionClaims(7, 2, NOW, NOW + 60, "n"), OTHER_KEY)
    with pytest.raises(InvalidToken) as exc:
        verify_session(token, KEY, NOW)
    assert exc.value.reason == "bad signature"


def test_changed_claims_break_the_signature() -> None:
    token = sign_session(SessionClaims(7, 1, NOW, NOW + 60, "n"), KEY)
    version, _payload, sig = token.split(".")
    forged = _b64(json.dumps([8, 1, NOW, NOW + 60, "n"]).encode())
    with pytest.raises(InvalidToken) as exc:
        verify_session(f"{version}.{forged}.{sig}", KEY, NOW)
    assert exc.value.reason == "bad signature"


def test_extended_expiry_breaks_the_signature() -> None:
    token = sign_session(SessionClaims(7, 1, NOW, NOW + 60, "n"), KEY)
    version, _payload, sig = token.split(".")
    forged = _b64(json.dumps([7, 1, NOW, NOW + 10**9, "n"], separators=(",", ":")).encode())
    with pytest.raises(InvalidToken, match="bad signature"):
        verify_session(f"{version}.{forged}.{sig}", KEY, NOW)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "garbage",
        "v1.abc",
        "v1.a.b.c",
        "v2.e30.AAAA",
        "v1.e30.!!!!",
        "v1.e30." + "A" * 2000,
        "v1.é.abc",
    ],
)
def test_malformed(token: str) -> None:
    with pytest.raises(InvalidToken) as exc:
        verify_session(token, KEY, NOW)
    assert exc.value.reason in ("malformed", "bad signature")


def test_well_signed_garbage_payload_is_malformed() -> None:
    import hashlib
    import hmac

    for payload in (b"not json", b"{}", b"[1,2,3]", b'[true,1,1,2,"n"]', b'["1",1,1,2,"n"]'):
        body = f"v1.{_b64(payload)}"
        sig = _b64(hmac.new(KEY, body.encode(), hashlib.sha256).digest())
        with pytest.raises(InvalidToken) as exc:
            verify_session(f"{body}.{sig}", KEY, NOW)
        assert exc.value.reason == "malformed", payload


def test_signature_with_non_canonical_base64_is_refused() -> None:
    token = sign_session(SessionClaims(7, 1, NOW, NOW + 60, "n"), KEY)
    body, sig = token.rsplit(".", 1)
    # 32 bytes -> 43 chars; the last char carries 4 unused bits we may flip.
    last = sig[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) ^ 1]
    with pytest.raises(InvalidToken):
        verify_session(f"{body}.{sig[:-1]}{twin}", KEY, NOW)


def test_weak_key_is_refused() -> None:
    with pytest.raises(ValueError):
        sign_session(SessionClaims(1, 1, NOW, NOW + 1, "n"), b"short")
    with pytest.raises(ValueError):
        verify_session("v1.a.b", b"", NOW)
