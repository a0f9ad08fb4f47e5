"""The byte strings that give a secret away, and one pattern that finds any of them.

A task prints a secret as it is, or through an encoding it did not choose: a JSON
string (``json.dumps`` escapes ``"`` and ``\\`` and, by default, writes non-ASCII as
``\\uXXXX``), a Python ``repr`` (of the text or of its bytes), HTML, a URL
(``quote``, ``quote_plus``), base64 (standard and URL-safe, alone or somewhere inside
a longer base64 stream, where the value may start at any of three alignments), hex.
Each of these is a form to mask.

Logs are read line by line (and the exit reason has its whitespace folded), so a
multi-line value such as a PEM key is also masked one line at a time: a value
printed through a logger that prefixes each line, or folded into one line, is still
caught line by line. A one-line value is also masked cut in two by a line break
anywhere (printed in two pieces, or wrapped at a column).

Stdlib only and cheap to import: the agent starts once per task.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse

MIN_MASKED_LENGTH = 4


# A value up to this long is also masked where line breaks cut it (``wrap_pattern``).
WRAPPED_UP_TO = 100


def masked_forms(value: str) -> set[bytes]:
    """The byte strings that give ``value`` away in a task's output."""
    forms: set[bytes] = set()
    for variant in _variants(value):
        forms |= _encodings(variant)
    return {f for f in forms if len(f) >= MIN_MASKED_LENGTH}


def wrappable(value: str) -> set[bytes]:
    """The variants of a one-line ``value`` short enough to be masked wrapped (a
    multi-line value is masked line by line instead)."""
    if len(value.strip().splitlines()) > 1:
        return set()
    return {v.encode() for v in _variants(value) if len(v) <= WRAPPED_UP_TO}


def wrap_pattern(raw: bytes) -> bytes:
    """``raw`` with a line break allowed between any two of its characters: printed in
    pieces (``print(v[:5]); print(v[5:])``) or wrapped at a column by a logger."""
    chars = [c.encode() for c in raw.decode()]
    return b"(?:\r?\n)?".join(re.escape(c) for c in chars)


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


def _encodings(text: str) -> set[bytes]:
    raw = text.encode()
    escaped = json.dumps(text)[1:-1]  # ASCII only: non-ASCII as \uXXXX
    forms = {
        raw,
        escaped.encode(),
        json.dumps(text, ensure_ascii=False)[1:-1].encode(),
        json.dumps(escaped)[1:-1].encode(),  # a JSON string inside a JSON string
        _upper_unicode_escapes(escaped).encode(),
        escaped.replace("/", "\\/").encode(),  # JSON writers that escape the slash
        repr(text)[1:-1].encode(),
        repr(raw)[2:-1].encode(),  # print(value.encode()): b'...\xc3\xa9...'
        _html_escape(text).encode(),
        urllib.parse.quote(text, safe="").encode(),
        urllib.parse.quote(text).encode(),  # the default keeps "/"
        urllib.parse.quote_plus(text, safe="").encode(),
        raw.hex().encode(),
        raw.hex().upper().encode(),
    }
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw)
        forms.update((whole, whole.rstrip(b"=")))
        forms.update(_base64_inside(raw, encode))
    return forms


def _html_escape(text: str) -> str:
    """As ``html.escape`` writes it (not imported: it would cost the agent's start)."""
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        text = text.replace(char, entity)
    return text.replace("'", "&#x27;")


def _upper_unicode_escapes(escaped: str) -> str:
    """``\\u00e9`` as ``\\u00E9``: JSON allows either case of hex digit."""
    parts = escaped.split("\\u")
    return "\\u".join([parts[0], *(p[:4].upper() + p[4:] for p in parts[1:])])


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


def trie_pattern(forms: set[bytes]) -> bytes:
    """One regular expression for all ``forms``, as a trie: at each byte the engine
    follows one branch instead of trying every form in turn, and where one form is a
    prefix of another the longer is tried first (the match is the longest)."""
    return b"|".join(trie_branches(forms))


def trie_branches(forms: set[bytes]) -> list[bytes]:
    """The trie's first level, one alternative per first byte: joined with ``|`` at
    the top of a pattern, not in a group, so the engine skips at C speed every byte
    no form starts with."""
    trie: _Node = {}
    for form in forms:
        node = trie
        for byte in form:
            node = node.setdefault(byte, {})
        node[_END] = {}
    return _branches(trie)


_Node = dict[int, "_Node"]
_END = -1  # the key that marks "a form ends here"


def _node_pattern(node: _Node) -> bytes:
    branches = _branches(node)
    if not branches:
        return b""
    body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
    # Where a form may end here, the longer ones are tried first (greedy), then none.
    return b"(?:" + body + b")?" if _END in node else body


def _branches(node: _Node) -> list[bytes]:
    branches = []
    for byte, child in sorted(node.items(), key=lambda item: item[0]):
        if byte == _END:
            continue
        # A run of single children is one literal, not a nest of groups.
        literal = bytearray([byte])
        while len(child) == 1 and _END not in child:
            ((byte, child),) = child.items()
            literal.append(byte)
        branches.append(re.escape(bytes(literal)) + _node_pattern(child))
    return branches
