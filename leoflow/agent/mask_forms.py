"""The byte strings that give a secret away, and one pattern that finds any of them.

A task prints a secret as it is, or through an encoding it did not choose: a JSON
string (``json.dumps`` escapes ``"`` and ``\\`` and, by default, writes non-ASCII as
``\\uXXXX``), a Python ``repr`` (of the text or of its bytes) or ``ascii``, HTML, a URL
(``quote``, ``quote_plus``, JavaScript's ``encodeURIComponent``, ``~`` as ``%7E``),
shell quoting (``shlex.quote``, bash's ``${v@Q}`` and ``printf %q``), base64
(standard and URL-safe, padded or not, alone or somewhere inside a longer base64
stream, where the value may start at any of three alignments), base32 (of the value
alone), hex (plain, or a byte at a time between spaces or colons). Each of these
is a form to mask, and so is each of them applied to the value encoded once already
(``_twice``).

The hex digits of an escape (``%2F``, ``\\u00E9``, ``\\xE9``, ``&#xE9;``) match in
either case (``trie_branches``), so lower-case and mixed-case escapes are masked
without a form for each spelling.

Line breaks are not part of any form: the masker looks for forms in the output with
its line breaks taken out (``masking``), so a form wrapped at a column (``base64``
at 76, ``openssl base64`` at 64) or printed in two pieces is still found. A
multi-line value such as a PEM key is also masked one line at a time, so it stays
masked under a logger's prefix on each line.

Stdlib only and cheap to import: the agent starts once per task.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Callable

MIN_MASKED_LENGTH = 4

# A one-line value up to this long is also masked encoded twice: its forms grow
# ~100-fold, which a 2 KB token would turn into a pattern that takes seconds to build.
DOUBLE_UP_TO = 256

LINE_BREAKS = b"\r\n"


def masked_forms(value: str) -> set[bytes]:
    """The byte strings that give ``value`` away in a task's output (without line
    breaks: the output is searched with its own taken out)."""
    forms: set[bytes] = set()
    one_line = len(value.strip().splitlines()) <= 1
    for variant in _variants(value):
        forms |= _encodings(variant)
        if one_line and len(variant) <= DOUBLE_UP_TO:
            forms |= _twice(variant)
    flat = {f.translate(None, LINE_BREAKS) for f in forms}
    return {f for f in flat if len(f) >= MIN_MASKED_LENGTH}


def plain_forms(value: str) -> set[bytes]:
    """The variants of ``value`` as printed, without line breaks: a tail of output
    that could be the start of one is held back even across a line break."""
    flat = {v.encode().translate(None, LINE_BREAKS) for v in _variants(value)}
    return {f for f in flat if len(f) >= MIN_MASKED_LENGTH}


def _variants(value: str) -> set[str]:
    """The value, and the parts of it that give it away on their own."""
    if len(value) < MIN_MASKED_LENGTH:
        return set()
    lines = [line.strip() for line in value.splitlines() if line.strip()]
    # A line folded as the exit reason folds it (runs of white space as one space).
    folded = {" ".join(line.split()) for line in lines}
    if len(lines) > 1 and all(len(line) >= MIN_MASKED_LENGTH for line in lines):
        # Every line masked masks the whole value, however it is joined or encoded
        # (base64 of the whole shows each line's bytes at some alignment).
        return {*lines, *folded}
    # A secret file's trailing newline is part of its value, not of what a task prints.
    variants = {value, value.strip(), " ".join(value.split()), *lines, *folded}
    if len(lines) > 1:
        variants.add(value.replace("\r\n", "\n").replace("\n", "\r\n"))
    return {v for v in variants if len(v) >= MIN_MASKED_LENGTH}


def _json(text: str) -> str:
    return json.dumps(text)[1:-1]  # ASCII only: non-ASCII as \uXXXX


def _url(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _url_path(text: str) -> str:
    return urllib.parse.quote(text)  # the default keeps "/"


def _url_plus(text: str) -> str:
    return urllib.parse.quote_plus(text, safe="")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _html_escape(text: str, quotes: tuple[str, str] = ("&quot;", "&#x27;")) -> str:
    """As ``html.escape`` writes it (not imported: it would cost the agent's start),
    or with other entities for the quotes."""
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', quotes[0])):
        text = text.replace(char, entity)
    return text.replace("'", quotes[1])


# What a value encoded once is encoded again with (``_twice``): the encodings that
# nest in practice — a URL's query holding JSON, base64 or a URL-encoded value; HTML
# holding JSON or a URL; base64 of JSON (a JWT's payload), of a URL or of base64;
# hex of any of them (base64 | xxd -p). Hex is not encoded again: its forms would
# start with digits, which ordinary output is full of (each costs the search a look).
_ONCE: tuple[Callable[[str], str], ...] = (_json, _url, _url_path, _url_plus, _b64, _b64url)
_AGAIN_AS_TEXT: tuple[Callable[[str], str], ...] = (
    _json,
    _url,
    _url_path,
    _url_plus,
    _html_escape,
)


def _twice(text: str) -> set[bytes]:
    """The forms of ``text`` encoded twice (depth 2 of the encodings ``_ONCE`` lists,
    each inside ``_AGAIN_AS_TEXT``, base64's or hex)."""
    forms: set[bytes] = set()
    for inner in {once(text) for once in _ONCE} - {text}:
        forms.update(again(inner).encode() for again in _AGAIN_AS_TEXT)
        forms.update(_base64_forms(inner.encode()))
        forms.update((inner.encode().hex().encode(), inner.encode().hex().upper().encode()))
    return forms


def _encodings(text: str) -> set[bytes]:
    raw = text.encode()
    escaped = _json(text)
    url = _url(text)
    hexed = [raw.hex(), raw.hex().upper()]
    forms = {
        raw,
        escaped.encode(),
        json.dumps(text, ensure_ascii=False)[1:-1].encode(),
        json.dumps(escaped)[1:-1].encode(),  # a JSON string inside a JSON string
        escaped.replace("/", "\\/").encode(),  # JSON writers that escape the slash
        # Go's json.Marshal writes <, > and & as \u003c, \u003e and \u0026.
        escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode(),
        repr(text)[1:-1].encode(),
        repr(raw)[2:-1].encode(),  # print(value.encode()): b'...\xc3\xa9...'
        ascii(text)[1:-1].encode(),  # ascii(), %a: non-ASCII as \xe9, \u20ac
        text.encode("unicode_escape"),
        _html_escape(text).encode(),
        _html_escape(text, ("&#34;", "&#39;")).encode(),  # Jinja's (markupsafe)
        _html_escape(text, ("&quot;", "&apos;")).encode(),  # XML's
        url.encode(),
        _url_path(text).encode(),
        _url_plus(text).encode(),
        # JavaScript's encodeURIComponent keeps !*'() as they are; PHP's and Java's
        # encoders write ~ as %7E.
        urllib.parse.quote(text, safe="!*'()").encode(),
        url.replace("~", "%7E").encode(),
        _url_plus(text).replace("~", "%7E").encode(),
        *_shell_quoted(text),
        *(h.encode() for h in hexed),
        # A byte at a time: hexdump's and openssl's spaced and colon-separated hex.
        *(
            sep.join(h[i : i + 2] for i in range(0, len(h), 2)).encode()
            for h in hexed
            for sep in " :"
        ),
    }
    forms.update(_base64_forms(raw))
    # base32 (coreutils' base32, TOTP seeds) of the value alone: its five alignments
    # inside a longer stream would start forms with more of the capitals and digits
    # ordinary output is full of, and cost every search.
    whole = base64.b32encode(raw)
    forms.update((whole, whole.rstrip(b"=")))
    return forms


def _base64_forms(raw: bytes) -> set[bytes]:
    """``raw`` in base64 (standard and URL-safe), padded or not, and inside a longer
    base64 stream at each alignment."""
    forms: set[bytes] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw)
        forms.update((whole, whole.rstrip(b"=")))
        forms.update(_base64_inside(raw, encode))
    return forms


# The characters bash's printf %q puts a backslash before.
_SHELL_SPECIAL = re.compile(r"""([\s"'`$!&*()\[\]{};<>?|^,#\\])""")


def _shell_quoted(text: str) -> list[bytes]:
    """The inside of the quotes ``shlex.quote`` and bash's ``${v@Q}`` put around a
    value with a single quote in it, and ``printf %q``'s backslashes."""
    return [
        text.replace("'", "'\"'\"'").encode(),
        text.replace("'", "'\\''").encode(),
        _SHELL_SPECIAL.sub(r"\\\1", text).encode(),
    ]


def _base64_inside(raw: bytes, encode: object) -> set[bytes]:
    """What base64 shows of ``raw`` when it sits inside a longer encoded stream.

    Base64 turns 3 bytes into 4 characters, so where ``raw`` starts (its offset mod 3)
    changes every character. For each alignment, the characters made of ``raw``'s bits
    alone are the same whatever surrounds it; those are the form."""
    assert callable(encode)
    forms = set()
    for align in range(3):
        encoded: bytes = encode(b"\0" * align + raw)
        first = -(-8 * align // 6)  # the first character with none of the padding's bits
        last = 8 * (align + len(raw)) // 6  # past the last one with only raw's bits
        forms.add(encoded[first:last])
    return forms
