"""The end of a task's output read as the literal forms spell it, so the masker can
tell whether it could be the start of a form written in another spelling.

The pattern that finds forms (``mask_trie``) matches each in several spellings: URL-
encoded by any encoder (``%2F``, ``%2f``, ``%252F``, ``+`` for a space), ``\\/`` for
``/``, and the hex digits of ``\\u00E9``, ``\\xE9`` and ``&#xE9;`` in either case. What
the masker holds back at the end of a read is judged against the literal forms, so
the end is also read with those spellings undone: percent-escapes decoded, ``\\/`` as
``/``, escapes' hex digits in lower case (as ``json.dumps``, ``repr`` and ``html``
write them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from leoflow.agent.mask_trie import SPELLED_UP_TO

# A spelled form (SPELLED_UP_TO bytes) is at most five times longer URL-encoded twice.
SPELLED_SPAN = 5 * SPELLED_UP_TO
# An escaped backslash first, kept as it is: in \\/ the / is not escaped.
_OTHER = rb"\\\\|%(?:25)?[0-9A-Fa-f]{2}|\\/|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|&#x[0-9A-Fa-f]+;"
_READINGS = [  # a + is a space in form encoding, itself elsewhere (encodeURI keeps it)
    re.compile(_OTHER + rb"|\+"),
    re.compile(_OTHER),
]
# What a spelling other than the literal holds, + aside. Each branch starts with a
# literal byte, so the engine skips at C speed the bytes none starts with.
_MARKS = re.compile(rb"%|\\[/ux]|&#x")
# An escape cut short by the end of a read: it could be any byte yet.
_PARTIAL = re.compile(
    rb"(?:%(?:25[0-9A-Fa-f]?|[0-9A-Fa-f])?|\\(?:u[0-9A-Fa-f]{0,3}|x[0-9A-Fa-f]?)?|&(?:#x?[0-9A-Fa-f]*)?)\Z"
)
_PLAIN = {b"+": b" ", b"\\/": b"/"}


def readings(flat: bytes, spaced: bool) -> Iterator[tuple[bytes, list[int], int]]:
    """The end of ``flat`` with the spellings undone — with ``+`` as a space when some
    form holds a space (``spaced``), and as itself: (the text, where in ``flat`` each
    of its bytes came from, where an escape cut short at the very end begins).
    Nothing when the end holds no spelling to undo: the literal forms judge it as it
    is (base64's + among them)."""
    low = len(flat) - SPELLED_SPAN if len(flat) > SPELLED_SPAN else 0
    marked = _MARKS.search(flat, low) is not None
    plus = spaced and flat.find(b"+", low) >= 0
    if not marked and not plus:
        return
    partial = _PARTIAL.search(flat, low)
    high = len(flat) if partial is None else partial.start()
    for escapes in _READINGS[0 if plus else 1 : 2 if marked else 1]:
        text, origin = _undone(flat, low, high, escapes)
        yield text, origin, high


def _undone(
    flat: bytes, low: int, high: int, escapes: re.Pattern[bytes]
) -> tuple[bytes, list[int]]:
    out: list[bytes] = []
    origin: list[int] = []
    pos = low
    for escape in escapes.finditer(flat, low, high):
        out.append(flat[pos : escape.start()])
        origin.extend(range(pos, escape.start()))
        text = escape.group()
        if text in _PLAIN or text[:1] == b"%":
            out.append(_PLAIN.get(text) or bytes([int(text[-2:], 16)]))
            origin.append(escape.start())
        else:  # \uXXXX, \xXX, &#xXX; with their hex digits in lower case
            out.append(text.lower())
            origin.extend(range(escape.start(), escape.end()))
        pos = escape.end()
    out.append(flat[pos:high])
    origin.extend(range(pos, high))
    return b"".join(out), origin
