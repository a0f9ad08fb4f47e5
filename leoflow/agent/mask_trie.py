"""One regular expression that finds any of a set of forms, in the spellings a form
has without a form for each.

The forms are a trie: at each byte the engine follows one branch instead of trying
every form in turn, and where one form is a prefix of another the longer is tried
first (the match is the longest). Two kinds of byte match more than themselves:

- a letter among the hex digits of an escape (``%2F``, ``\\u00E9``, ``\\xE9``,
  ``&#xE9;``) matches in either case: encoders differ (``%2f``, ``%2F``);
- a byte that URL encoders may or may not escape — anything but a letter, a digit,
  ``-``, ``.`` and ``_`` — matches as itself or percent-encoded, once or twice, in
  either case (``/``, ``%2F``, ``%2f``, ``%252F``), and a space as ``+`` too. Which
  bytes an encoder leaves alone differs from one to another (Python's ``quote``
  keeps ``/``, JavaScript's ``encodeURIComponent`` keeps ``!*'()``, form encoding
  writes a space as ``+``), so every form is also found URL-encoded by any of them;
  and ``/`` as ``\\/`` too, as PHP's JSON writes it.
  Only forms up to ``SPELLED_UP_TO`` bytes, and not hex a byte at a time (its
  separators are not a URL's): each such byte is a group in the pattern, and a long
  form's would take the engine seconds to compile. A long value is still found
  URL-encoded as ``quote`` and ``quote_plus`` write it (forms of their own).
"""

from __future__ import annotations

import re

_Node = dict[int, "_Node"]
_END = -1  # the key that marks "a form ends here"
_EITHER_CASE = 0x100  # added to a lower-case hex letter that matches in either case
_OR_ESCAPED = 0x200  # added to a byte that matches percent-encoded too
_NEVER_ESCAPED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._")
_ESCAPE_DIGITS = re.compile(
    rb"(?<=%)[0-9A-Fa-f]{2}|(?<=\\u)[0-9A-Fa-f]{4}|(?<=\\x)[0-9A-Fa-f]{2}|(?<=&#x)[0-9A-Fa-f]+(?=;)"
)
_SEPARATED_HEX = re.compile(rb"[0-9A-Fa-f]{2}(?:[ :][0-9A-Fa-f]{2})+")
SPELLED_UP_TO = 256
_LITERAL = [re.escape(bytes([byte])) for byte in range(256)]


def trie_pattern(forms: set[bytes], spellings: bool = True) -> bytes:
    """One regular expression for all ``forms`` (see the module's doc); without
    ``spellings``, each byte matches only itself."""
    return b"|".join(trie_branches(forms, spellings))


def trie_branches(forms: set[bytes], spellings: bool = True) -> list[bytes]:
    """The trie's first level, one alternative per first spelling of a byte: joined
    with ``|`` at the top of a pattern, not in a group, so the engine skips at C speed
    every byte no form starts with."""
    trie: _Node = {}
    for form in forms:
        node = trie
        for atom in _atoms(form) if spellings else form:
            node = node.setdefault(atom, {})
        node[_END] = {}
    return _branches(trie, top=True)


def _atoms(form: bytes) -> list[int]:
    if len(form) > SPELLED_UP_TO or _SEPARATED_HEX.fullmatch(form):
        atoms = list(form)
    else:
        atoms = [b if b in _NEVER_ESCAPED else b + _OR_ESCAPED for b in form]
    for digits in _ESCAPE_DIGITS.finditer(form):
        for i in range(*digits.span()):
            if form[i] >= ord("A"):
                atoms[i] = (form[i] | 0x20) + _EITHER_CASE
    return atoms


def _hex_digits(byte: int) -> bytes:
    return b"".join(
        b"[" + bytes([d | 0x20, d & ~0x20]) + b"]" if d >= ord("A") else bytes([d])
        for d in b"%02X" % byte
    )


def _spellings(atom: int) -> list[bytes]:
    """The patterns of each way ``atom`` may be written; each starts with a literal."""
    if atom >= _OR_ESCAPED:
        byte = atom - _OR_ESCAPED
        escaped = [b"%(?:25)?" + _hex_digits(byte)]
        if byte == ord(" "):  # form encoding's +, and that + URL-encoded again
            escaped += [b"\\+", b"%2[bB]"]
        if byte == ord("/"):  # JSON writers that escape the slash (PHP's)
            escaped.append(b"\\\\/")
        return [_LITERAL[byte], *escaped]
    if atom >= _EITHER_CASE:
        letter = atom - _EITHER_CASE
        return [b"[" + bytes([letter, letter ^ 0x20]) + b"]"]
    return [_LITERAL[atom]]


def _atom(atom: int) -> bytes:
    spellings = _spellings(atom)
    return spellings[0] if len(spellings) == 1 else b"(?:" + b"|".join(spellings) + b")"


def _node_pattern(node: _Node) -> bytes:
    branches = _branches(node)
    if not branches:
        return b""
    body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
    # Where a form may end here, the longer ones are tried first (greedy), then none.
    return b"(?:" + body + b")?" if _END in node else body


def _branches(node: _Node, top: bool = False) -> list[bytes]:
    branches = []
    for atom, child in sorted(node.items(), key=lambda item: item[0]):
        if atom == _END:
            continue
        # A run of single children is one piece of pattern, not a nest of groups.
        run = []
        while len(child) == 1 and _END not in child:
            ((next_atom, child),) = child.items()
            run.append(_atom(next_atom))
        rest = b"".join(run) + _node_pattern(child)
        # At the top, each spelling is its own branch: a branch that starts with a
        # group would stop the engine skipping bytes no form starts with.
        firsts = _spellings(atom) if top else [_atom(atom)]
        branches += [first + rest for first in firsts]
    return branches
