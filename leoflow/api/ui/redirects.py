"""Where the web UI may send a browser back to (``/login?next=``, a moved page): a path
on this origin, judged the way a browser and a server would read it.

A browser's URL parser strips tab, CR and LF anywhere and leading C0 controls and
spaces, reads ``\\`` as ``/`` in an http(s) URL, and takes ``//host`` or ``/\\host`` as
another host; a server or a proxy may decode ``%2F``/``%5C`` before that. So a target
is refused unless it, and every percent-decoding of it, is a single-slash absolute
path with no backslash, no control or blank character, no scheme or host (and no raw
``@`` in its path); a refused target becomes the default (``/``). Unlike a
parse-then-check, nothing here depends on agreeing with one parser's reading."""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote, urlsplit

MAX_TARGET = 2000
# Decoding deeper than this and still changing: refused (no real link is triple-encoded).
_DECODINGS = 3


def _bad_char(char: str, *, raw: bool) -> bool:
    # Cc: controls (tab, CR, LF, NUL, DEL); Cf: invisible formatting (bidi, zero width);
    # Z*: a space or line separator, which a browser may strip: never raw (a link's
    # spaces are encoded), but "a b" once a query's %20 is decoded is harmless.
    category = unicodedata.category(char)
    return char == "\\" or category[0] == "C" or (raw and category[0] == "Z")


def _plain_path(text: str, *, raw: bool) -> bool:
    if not text.startswith("/") or text.startswith(("//", "/\\")):
        return False
    if any(_bad_char(c, raw=raw) for c in text):
        return False
    path = text.partition("?")[0].partition("#")[0]
    if (raw and "@" in path) or "//" in path or "/./" in path + "/" or "/../" in path + "/":
        return False
    parts = urlsplit(text)
    return not parts.scheme and not parts.netloc


def same_origin_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a path on this origin by every reading, else ``default``."""
    if not target or len(target) > MAX_TARGET:
        return default
    text = target
    for depth in range(_DECODINGS + 1):
        if not _plain_path(text, raw=depth == 0):
            return default
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:  # %FF: bytes no browser would show as a path
            return default
        if decoded == text:
            return target
        text = decoded
    return default
