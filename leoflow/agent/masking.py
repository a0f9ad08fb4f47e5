"""Secret values never leave the agent in anything a task produced: they become ``***``.

Every sink is masked with the same forms (``mask_forms``): the log (stdout and stderr,
as a stream), the message (the exit reason the command wrote, and the rest of the
sentence), and the output (``$LEOFLOW_OUTPUT``, masked inside its JSON strings so it
stays JSON; the scheduler makes mapped items from it). Values shorter than
``MIN_MASKED_LENGTH`` (4) characters are not masked: a secret of ``1`` or ``yes``
would turn every such word into ``***`` and tell a reader the secret anyway.

Output arrives in arbitrary chunks, so a value can be split across two of them. Each
stream keeps back the end of what it has seen while that end could still be the
start of a form, and lets it go with the next chunk or when the stream ends. Forms
that overlap (two secrets sharing characters) are masked as one ``***``, so no part
of either shows.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from leoflow.agent.mask_forms import (
    MIN_MASKED_LENGTH,
    masked_forms,
    trie_branches,
    trie_pattern,
    wrap_pattern,
    wrappable,
)

__all__ = ["MASK", "MIN_MASKED_LENGTH", "Masker", "Secrets", "masked_forms"]

MASK = b"***"
_HEAD = 8  # proper prefixes shorter than this are a set; longer ones found by their head


class Secrets:
    """A task's secret values, compiled once for all its sinks."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[bytes] = set()
        wrapped: set[bytes] = set()
        for value in values:
            forms |= masked_forms(value)
            wrapped |= wrappable(value)
        self.active = bool(forms)
        self.longest = max(map(len, forms), default=0)
        # Longest first: a value cut by line breaks before any literal form (it also
        # matches the value whole), then the trie of literal forms.
        self._wrapped = sorted(wrapped, key=len, reverse=True)
        wraps = [wrap_pattern(w) for w in self._wrapped]
        self._pattern = re.compile(b"|".join(wraps + trie_branches(forms))) if forms else None
        # Where one starts, the longest of them is the match (only there: matches are
        # rare). Without a wrapped value the trie's own match is the longest already.
        self._each = [re.compile(p) for p in [*wraps, trie_pattern(forms)]] if wraps else []
        self._heads = {f[:size] for f in forms for size in range(1, min(_HEAD, len(f)))}
        self._by_head: dict[bytes, list[bytes]] = {}
        for form in forms:
            if len(form) > _HEAD:
                self._by_head.setdefault(form[:_HEAD], []).append(form)
        # Where a longer form may start: found by the engine, not a loop over bytes.
        heads = set(self._by_head)
        self._head_pattern = re.compile(trie_pattern(heads)) if heads else None

    @staticmethod
    def of(values: Iterable[str]) -> Secrets:
        """The compiled forms of ``values``, made once for a pool agent's many tries
        of the same task (a long secret's thousands of forms take ~0.1 s to compile)."""
        return _compiled(tuple(sorted(set(values))))

    def spans(self, buffer: bytes, before: int) -> Iterator[tuple[int, int]]:
        """(start, end) of the longest form starting at each position below ``before``."""
        if self._pattern is None:
            return
        search, pos = self._pattern.search, 0
        # Searched again from the byte after each start, not its end: overlapping forms
        # (two secrets sharing characters) are found too.
        while (match := search(buffer, pos)) is not None and match.start() < before:
            start = match.start()
            ends = (m.end() for p in self._each if (m := p.match(buffer, start)) is not None)
            yield start, max(ends, default=match.end())
            pos = start + 1

    def waiting(self, buffer: bytes) -> int:
        """Where the end of ``buffer`` that could still grow into a form begins
        (``len(buffer)`` when no end could)."""
        return min(self._waiting_literal(buffer), self._waiting_wrapped(buffer))

    def _waiting_literal(self, buffer: bytes) -> int:
        size = len(buffer)
        pos = max(0, size - self.longest + 1)
        while self._head_pattern is not None:
            match = self._head_pattern.search(buffer, pos)
            if match is None:
                break
            tail = buffer[match.start() :]
            if any(len(f) > len(tail) and f.startswith(tail) for f in self._by_head[tail[:_HEAD]]):
                return match.start()
            pos = match.start() + 1
        for start in range(max(0, size - _HEAD + 1), size):
            if buffer[start:] in self._heads:
                return start
        return size

    def _waiting_wrapped(self, buffer: bytes) -> int:
        """Where the end of ``buffer`` that could be the start of a value cut by line
        breaks begins (``len(buffer)`` when none); a cut value holds at most one break
        (2 bytes) between each two characters."""
        size = earliest = len(buffer)
        for raw in self._wrapped:
            pos = max(0, size - 3 * len(raw))
            while (start := buffer.find(raw[:1], pos, earliest)) != -1:
                tail = buffer[start:]
                if b"\n" in tail:
                    joined = tail.replace(b"\r\n", b"").replace(b"\n", b"")
                    if len(joined) < len(raw) and raw.startswith(joined):
                        earliest = start
                        break
                pos = start + 1
        return earliest

    def found(self, data: bytes) -> bool:
        return self._pattern is not None and self._pattern.search(data) is not None

    def text(self, text: str) -> str:
        """``text`` with every form masked (a message, a string of the output)."""
        if not self.found(text.encode("utf-8", "surrogatepass")):
            return text
        masker = Masker(self)
        data = masker.feed(text.encode("utf-8", "surrogatepass")) + masker.flush()
        return data.decode("utf-8", "surrogatepass")

    def json_text(self, text: str) -> str | None:
        """The output's JSON text with every form masked inside its strings (keys too)
        and numbers, so it stays JSON; None when a form lies across the JSON itself
        (a value spanning a quote and a comma), where no string holds it to mask."""
        if not self.found(text.encode("utf-8", "surrogatepass")):
            return text
        try:
            masked = json.dumps(self._masked(json.loads(text)), ensure_ascii=False)
        except (ValueError, RecursionError):
            return None
        return None if self.found(masked.encode("utf-8", "surrogatepass")) else masked

    def completion(
        self, message: str, output: str | None, output_error: str
    ) -> tuple[str, str | None, str]:
        """A try's message, output and output error as they may leave the agent."""
        if output is not None and (masked := self.json_text(output)) is None:
            output = None
            message = output_error = (
                "the output holds a secret's value across its JSON syntax, where it "
                "cannot be masked; write secrets inside strings, or not at all"
            )
        elif output is not None:
            output = masked
        return self.text(message), output, self.text(output_error)

    def _masked(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._masked(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self._masked(v) for k, v in value.items()}
        # A number (or true, false, null) that spells a secret becomes the mask.
        return MASK.decode() if self.found(json.dumps(value).encode()) else value


_compiled = functools.lru_cache(maxsize=32)(Secrets)


class Masker:
    """Masks one output stream; ``feed`` what arrives, ``flush`` at its end."""

    def __init__(self, secrets: Secrets | Iterable[str]) -> None:
        self._secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        self._held = b""
        self._masked = 0  # how much of the start of _held is already behind a MASK sent

    @property
    def active(self) -> bool:
        return self._secrets.active

    def feed(self, data: bytes) -> bytes:
        if not self._secrets.active:
            return data
        buffer = self._held + data
        return self._release(buffer, self._secrets.waiting(buffer))

    def flush(self) -> bytes:
        buffer, self._held = self._held, b""
        return self._release(buffer, len(buffer)) if buffer else buffer

    def _release(self, buffer: bytes, safe: int) -> bytes:
        """Send what lies before ``safe`` (no form starting there can grow any more),
        every run of overlapping forms as one MASK; keep the rest."""
        out: list[bytes] = []
        pos = 0  # the first byte not yet sent nor masked
        # The run being merged: (start, end); a run carried over was masked already.
        run_start, run_end, sent = 0, self._masked, self._masked > 0
        for start, end in self._secrets.spans(buffer, safe):
            if start < run_end:
                run_end = max(run_end, end)
                continue
            if run_end > pos or sent:
                if not sent:
                    out += (buffer[pos:run_start], MASK)
                pos = run_end
            run_start, run_end, sent = start, end, False
        if run_end > pos or sent:
            if not sent:
                out += (buffer[pos:run_start], MASK)
            pos = run_end
        out.append(buffer[pos:safe])
        self._held = buffer[safe:]
        # A run may reach past ``safe``: what of it stays held is masked already.
        self._masked = max(0, pos - safe)
        return b"".join(out)
