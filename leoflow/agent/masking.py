"""Secret values never leave the agent in a task's log: they become ``***`` first.

A task's resolved secrets are masked as they are (UTF-8), base64-encoded (standard
and URL-safe alphabets, with and without padding) and URL-encoded (``quote`` and
``quote_plus``), in the spirit of Airflow's log masking. Values shorter than
``MIN_MASKED_LENGTH`` (4) characters are not masked: a secret of ``1`` or ``yes`` would
turn every such word in the log into ``***`` and tell a reader the secret anyway.

Output arrives in arbitrary chunks, so a value can be split across two of them. Each
stream keeps back the end of what it has seen while that end could still be the start
of a secret, and lets it go with the next chunk or when the stream ends.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable

MASK = b"***"
MIN_MASKED_LENGTH = 4


def masked_forms(value: str) -> set[bytes]:
    """The byte strings that give ``value`` away in a log."""
    if len(value) < MIN_MASKED_LENGTH:
        return set()
    raw = value.encode()
    forms = {raw}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(raw)
        forms.update((encoded, encoded.rstrip(b"=")))
    forms.add(urllib.parse.quote(value, safe="").encode())
    forms.add(urllib.parse.quote_plus(value, safe="").encode())
    # A secret file's trailing newline is part of its value, but not of what a task prints.
    stripped = value.strip()
    if stripped != value:
        forms |= masked_forms(stripped)
    return {f for f in forms if len(f) >= MIN_MASKED_LENGTH}


class Masker:
    """Masks one output stream; ``feed`` what arrives, ``flush`` at its end."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[bytes] = set()
        for value in values:
            forms |= masked_forms(value)
        # Longest first: where two forms match (a value and its padded base64, a
        # value inside another), the alternation takes the longer.
        self._forms = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile(b"|".join(re.escape(f) for f in self._forms))
        self._held = b""

    @property
    def active(self) -> bool:
        return bool(self._forms)

    def feed(self, data: bytes) -> bytes:
        if not self._forms:
            return data
        buffer = self._held + data
        # What could still grow into a (longer) form waits for the next chunk.
        cut = len(buffer) - self._partial_suffix(buffer)
        out: list[bytes] = []
        pos = 0
        for match in self._pattern.finditer(buffer):
            if match.start() >= cut:
                break
            out += (buffer[pos : match.start()], MASK)
            pos = match.end()
        cut = max(cut, pos)
        out.append(buffer[pos:cut])
        self._held = buffer[cut:]
        return b"".join(out)

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return self._pattern.sub(MASK, held) if held else held

    def _partial_suffix(self, buffer: bytes) -> int:
        """Length of the longest end of ``buffer`` that is a proper start of a form."""
        longest = min(len(self._forms[0]) - 1, len(buffer))
        for size in range(longest, 0, -1):
            tail = buffer[-size:]
            if any(len(form) > size and form.startswith(tail) for form in self._forms):
                return size
        return 0
