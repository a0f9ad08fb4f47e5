"""Asset URIs: what a ``produces:`` or ``consumes:`` entry may say, in one canonical form.

Two spellings of one asset must be one asset, or an event on one never triggers a DAG
scheduled on the other; so every URI is normalised as Airflow and OpenLineage do:

- a name without ``://`` (``orders``) is a plain name, kept as written;
- otherwise the scheme and the host are lower-cased, the query's parameters sorted and
  the fragment dropped (it names a part of a document, not another asset);
- credentials never belong in a name that is stored, logged and shown: a user, a
  password or a credential-looking query parameter (``?password=``, ``?token=``) is an
  error, not something silently dropped, so the author learns the secret leaked into
  the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Airflow's limit for an asset URI; it is also a column width in the store.
MAX_URI_CHARS = 1500
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
# Query parameters that carry a secret (an S3 presigned URL, a database DSN's password).
_SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential", "signature")
_SECRET_KEYS = {"sig", "apikey", "api_key", "access_key", "accesskey"}
# leoflow:// would read as ours; Airflow reserves airflow:// the same way.
_RESERVED = {"leoflow", "airflow"}


class AssetUriError(ValueError):
    """A URI that cannot name an asset; the message says what is wrong and what to write."""


def _short(value: str) -> str:
    return repr(value) if len(value) <= 80 else repr(value[:77] + "...")


def _secret_key(key: str) -> bool:
    lowered = key.lower()
    return lowered in _SECRET_KEYS or any(word in lowered for word in _SECRET_WORDS)


def normalize_uri(value: object) -> str:
    """``value`` as the canonical asset URI, or AssetUriError saying why it is none."""
    if not isinstance(value, str):
        raise AssetUriError(f"expected an asset URI or name (a string), got {value!r}")
    if not value.strip():
        raise AssetUriError("expected an asset URI or name, got an empty string")
    if len(value) > MAX_URI_CHARS:
        raise AssetUriError(f"an asset URI has at most {MAX_URI_CHARS} characters")
    if not value.isascii():
        raise AssetUriError(
            f"an asset URI is ASCII only (percent-encode other characters), got {_short(value)}"
        )
    if any(char.isspace() or not char.isprintable() for char in value):
        raise AssetUriError(
            f"an asset URI has no spaces or control characters, got {_short(value)}"
        )
    if "://" not in value:
        return value  # a plain name: kept as written
    scheme = value.split("://", 1)[0]
    if not _SCHEME.match(scheme):
        raise AssetUriError(
            f"malformed scheme {scheme!r} in {_short(value)}: a scheme is a letter followed "
            "by letters, digits, '+', '-' or '.', as in s3://bucket/key"
        )
    if scheme.lower() in _RESERVED:
        raise AssetUriError(f"the scheme {scheme.lower()}:// is reserved")
    rest = value.split("://", 1)[1]
    rest = rest.split("#", 1)[0]  # the fragment: no part of the asset
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        what = "a user name and password" if ":" in userinfo else "a user name"
        raise AssetUriError(
            f"an asset URI must not contain credentials, and {_short(_masked(value))} has "
            f"{what}; name the asset without them (the connection holds the credentials)"
        )
    pairs = [pair for pair in query.split("&") if pair]
    for pair in pairs:
        key = _unquote(pair.partition("=")[0])
        if _secret_key(key):
            raise AssetUriError(
                f"an asset URI must not contain credentials, and its query parameter "
                f"{key!r} looks like one; name the asset without it"
            )
    port = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    if ":" in port:
        digits = port.rpartition(":")[2]
        if not (digits.isdigit() and int(digits) <= 65535) and digits != "":
            raise AssetUriError(f"the port in {_short(value)} is not a number from 0 to 65535")
    path = slash + path
    if not hostport and path in ("", "/"):
        raise AssetUriError(f"{_short(value)} names no host and no path")
    ordered = "&".join(sorted(pairs, key=lambda pair: pair.partition("=")[::2]))
    return f"{scheme.lower()}://{hostport.lower()}{path}" + (f"?{ordered}" if ordered else "")


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quote_part(value: str) -> str:
    """``value`` percent-encoded but for unreserved characters (RFC 3986): one URI part."""
    return "".join(
        char if char in _PLAIN else "".join(f"%{b:02X}" for b in char.encode("utf-8"))
        for char in value
    )


def _unquote(text: str) -> str:
    """``%XX`` and ``+`` decoded (as a query's key is read), leniently."""
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        hexa = text[index + 1 : index + 3]
        if char == "%" and len(hexa) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexa):
            out.append(int(hexa, 16))
            index += 3
            continue
        out += b" " if char == "+" else char.encode("utf-8")
        index += 1
    return out.decode("utf-8", errors="replace")


def _masked(value: str) -> str:
    """``value`` with whatever sits before the host's ``@`` hidden: errors are logged."""
    scheme, rest = value.split("://", 1)
    netloc, slash, path = rest.partition("/")
    return f"{scheme}://***@{netloc.rpartition('@')[2]}{slash}{path}"


def normalize_uris(values: Iterable[object]) -> tuple[str, ...]:
    """Each URI normalised, duplicates (after normalising) dropped, in the order given."""
    return tuple(dict.fromkeys(normalize_uri(value) for value in values))
