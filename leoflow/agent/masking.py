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
are looked for with the output's line breaks taken out, so a form wrapped at a
column or printed in pieces is found too; an end that could be continued on the
next line is kept back only when it could be (see ``Secrets.waiting``), so an
ordinary line is not held while the task is quiet. Forms that overlap (two secrets
sharing characters) are masked as one ``***``, so no part of either shows.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from leoflow.agent.mask_forms import MIN_MASKED_LENGTH, masked_forms, plain_forms
from leoflow.agent.mask_spellings import readings
from leoflow.agent.mask_trie import trie_pattern

__all__ = ["MASK", "MIN_MASKED_LENGTH", "Masker", "Secrets", "masked_forms"]

MASK = b"***"
_HEAD = 8  # proper prefixes shorter than this are a set; longer ones found by their head
# A value as printed, up to this long, is kept back at the end of a line as soon as
# the line ends with its start (printed in two pieces, one per line).
PIECES_UP_TO = 100
# The characters of base64 and hex: a line ending in a run of at least BLOB of them
# may be a wrapped encoding that goes on on the next line.
_BLOB_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
BLOB = 16
_BREAK = re.compile(b"[\r\n]")


_CONTROL_ESCAPE = re.compile(r"\\u00[01][0-9a-fA-F]")


class _Flat:
    """Where the bytes of ``buffer`` with its line breaks taken out came from; made
    only where a form is found or one could run over a break (a list of every line
    break of a 64 KB read would cost more than the search)."""

    def __init__(self, buffer: bytes, start: int = 0) -> None:
        self._start = start  # breaks before it are only counted
        self._before = buffer.count(b"\n", 0, start) + buffer.count(b"\r", 0, start)
        self._breaks = [m.start() for m in _BREAK.finditer(buffer, start)]
        # The index in the flat text of the byte that follows each break.
        self._next = [at - self._before - i for i, at in enumerate(self._breaks)]

    def original(self, flat: int) -> int:
        return flat + self._before + bisect.bisect_right(self._next, flat)

    def flat(self, original: int) -> int:
        return original - self._before - bisect.bisect_left(self._breaks, original)


def _flattened(data: bytes) -> bytes:
    """``data`` without its line breaks (two replaces: four times faster than a
    translate that deletes)."""
    flat = data.replace(b"\n", b"")
    return flat.replace(b"\r", b"") if b"\r" in flat else flat


def _flat_from(buffer: bytes, size: int) -> int:
    """Where the end of ``buffer`` holding ``size`` bytes other than line breaks begins
    (or before it)."""
    start = max(0, len(buffer) - size)
    while start > 0:
        breaks = buffer.count(b"\n", start) + buffer.count(b"\r", start)
        earlier = max(0, len(buffer) - size - breaks)
        if earlier == start:
            break
        start = earlier
    return start


class Secrets:
    """A task's secret values, compiled once for all its sinks."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[bytes] = set()
        plain: set[bytes] = set()
        self._spaced = False  # whether a + in the output may stand for a value's space
        for value in values:
            self._spaced |= any(c.isspace() for c in value.strip())
            forms |= masked_forms(value)
            plain |= {p for p in plain_forms(value) if len(p) <= PIECES_UP_TO}
        self.active = bool(forms)
        self.longest = max(map(len, forms), default=0)
        # A trie: where one form is a prefix of another the longer is the match.
        self._pattern = re.compile(trie_pattern(forms)) if forms else None
        self._plain_heads = {p[:size] for p in plain for size in range(1, len(p))}
        short = {f[:size] for f in forms for size in range(1, min(_HEAD, len(f)))}
        # The proper prefixes shorter than _HEAD, as the end of a text.
        self._short_pattern = (
            re.compile(b"(?:" + trie_pattern(short, spellings=False) + b")\\Z") if short else None
        )
        self._by_head: dict[bytes, list[bytes]] = {}
        for form in forms:
            if len(form) > _HEAD:
                self._by_head.setdefault(form[:_HEAD], []).append(form)
        # Where a longer form may start: found by the engine, not a loop over bytes.
        heads = set(self._by_head)
        self._head_pattern = re.compile(trie_pattern(heads, spellings=False)) if heads else None

    @staticmethod
    def of(values: Iterable[str]) -> Secrets:
        """The compiled forms of ``values``, made once for a pool agent's many tries
        of the same task (a long secret's thousands of forms take ~0.1 s to compile)."""
        return _compiled(tuple(sorted(set(values))))

    def spans(
        self, buffer: bytes, before: int, flat: bytes | None = None
    ) -> Iterator[tuple[int, int]]:
        """(start, end) of the longest form starting at each position below ``before``,
        line breaks inside a form included in its span. ``flat``: ``buffer`` without
        its line breaks, where the caller has it already."""
        flat = _flattened(buffer) if flat is None else flat
        if len(flat) == len(buffer):
            yield from self._flat_spans(buffer, before)
            return
        where: _Flat | None = None
        # ``before`` in the flat text, less the breaks before it (counted after it: the
        # end is short).
        after = (
            buffer.count(b"\n", before) + buffer.count(b"\r", before) if before < len(buffer) else 0
        )
        flat_before = before - (len(buffer) - len(flat) - after)
        for start, end in self._flat_spans(flat, flat_before):
            where = where or _Flat(buffer, start)  # a flat index is at most its original
            yield where.original(start), where.original(end - 1) + 1

    def _flat_spans(self, flat: bytes, before: int) -> Iterator[tuple[int, int]]:
        if self._pattern is None:
            return
        search, pos = self._pattern.search, 0
        # Searched again from the byte after each start, not its end: overlapping forms
        # (two secrets sharing characters) are found too.
        while (match := search(flat, pos)) is not None and match.start() < before:
            yield match.start(), match.end()
            pos = match.start() + 1

    def waiting(self, buffer: bytes, sent: bytes = b"", flat: bytes | None = None) -> int:
        """Where the end of ``buffer`` that could still grow into a form begins
        (``len(buffer)`` when no end could). ``sent``: the end of what was sent
        before ``buffer``, up to ``BLOB`` bytes.

        An end that runs on over a line break waits only where the break could cut a
        form: after a run of ``BLOB`` base64 or hex characters (a wrapped encoding),
        where a line is nothing but the start of a form, or within the start of a
        value as printed (a form or a value printed in two pieces)."""
        flat = _flattened(buffer) if flat is None else flat
        if len(flat) == len(buffer):
            return self._waiting_form(buffer)
        rest = max(buffer.rfind(b"\n"), buffer.rfind(b"\r")) + 1
        start = self._waiting_form(flat)
        last_line = len(buffer) - rest  # in the flat text too: it holds no break
        if start >= len(flat) - last_line:  # nothing waiting runs over a break
            return rest + start - (len(flat) - last_line)
        # Only the end of the buffer matters: what may wait is at most the longest form.
        where = _Flat(buffer, _flat_from(buffer, len(flat) - start))
        cut = _BREAK.search(buffer, where.original(start))
        assert cut is not None
        origin = where.original(start)
        line = buffer[max(0, cut.start() - BLOB) : cut.start()]
        line = (sent + line)[-BLOB:] if cut.start() < BLOB else line
        run = len(line) - len(line.rstrip(_BLOB_CHARS))
        before = buffer[origin - 1 : origin] if origin else sent[-1:]
        if run >= BLOB or before in (b"", b"\n", b"\r"):
            return origin
        for at in range(max(start, len(flat) - PIECES_UP_TO), where.flat(rest)):
            if flat[at:] in self._plain_heads:
                return where.original(at)
        return rest + self._waiting_form(buffer[rest:])

    def _waiting_form(self, flat: bytes) -> int:
        """``_waiting_literal``, and the same of the end with the spellings the pattern
        matches undone (``mask_spellings``): a form's start waits in any of them."""
        start = self._waiting_literal(flat)
        for text, origin, high in readings(flat, self._spaced):
            at = self._waiting_literal(text)
            start = min(start, origin[at] if at < len(text) else high)
        return start

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
        end = buffer[-_HEAD + 1 :]
        short = self._short_pattern.search(end) if self._short_pattern is not None else None
        return size if short is None else size - len(end) + short.start()

    def found(self, data: bytes) -> bool:
        flat = _flattened(data)
        return self._pattern is not None and self._pattern.search(flat) is not None

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
        # A control character's escape (\u0000) is JSON's spelling of a string's
        # byte, already masked where it was part of a value: not a form lying across.
        probe = _CONTROL_ESCAPE.sub("\x00", masked)
        return None if self.found(probe.encode("utf-8", "surrogatepass")) else masked

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
        self._sent = b""  # the end of what was sent: where the held bytes' line began

    @property
    def active(self) -> bool:
        return self._secrets.active

    def feed(self, data: bytes) -> bytes:
        if not self._secrets.active:
            return data
        buffer = self._held + data
        flat = _flattened(buffer)
        return self._release(buffer, self._secrets.waiting(buffer, self._sent, flat), flat)

    def flush(self) -> bytes:
        buffer, self._held = self._held, b""
        return self._release(buffer, len(buffer)) if buffer else buffer

    def _release(self, buffer: bytes, safe: int, flat: bytes | None = None) -> bytes:
        """Send what lies before ``safe`` (no form starting there can grow any more),
        every run of overlapping forms as one MASK; keep the rest."""
        out: list[bytes] = []
        pos = 0  # the first byte not yet sent nor masked
        # The run being merged: (start, end); a run carried over was masked already.
        run_start, run_end, sent = 0, self._masked, self._masked > 0
        for start, end in self._secrets.spans(buffer, safe, flat):
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
        released = b"".join(out)
        self._sent = (self._sent + released[-BLOB:])[-BLOB:]
        return released
