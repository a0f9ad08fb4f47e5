"""Task log bytes -> HTML: text escaped, ANSI SGR colours as ``<span class>``.

``AnsiRenderer`` is fed chunks as they arrive (a followed log) and keeps what a
chunk boundary can split: a UTF-8 sequence, an escape sequence, the current
colours. Other escape sequences (cursor moves, titles) are dropped.
"""

from __future__ import annotations

import codecs
import html
import re

# CSI ... final byte, or OSC ... BEL/ST; an ESC at the very end may be incomplete.
_ESCAPE = re.compile(r"\x1b(?:\[([0-9;:?]*)([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_PARTIAL = re.compile(r"\x1b(?:\[[0-9;:?]*|\][^\x07\x1b]*|\]?[^\x07]*\x1b)?$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class AnsiRenderer:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._fg: int | None = None
        self._bg: int | None = None
        self._bold = False
        self._open = False

    def _classes(self) -> str:
        out = []
        if self._bold:
            out.append("a-b")
        if self._fg is not None:
            out.append(f"a-f{self._fg}")
        if self._bg is not None:
            out.append(f"a-g{self._bg}")
        return " ".join(out)

    def _sgr(self, params: str) -> None:
        codes = [int(p) if p.isdigit() else 0 for p in params.replace(":", ";").split(";")]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self._fg = self._bg = None
                self._bold = False
            elif c == 1:
                self._bold = True
            elif c == 22:
                self._bold = False
            elif 30 <= c <= 37:
                self._fg = c - 30
            elif 90 <= c <= 97:
                self._fg = c - 90 + 8
            elif c == 39:
                self._fg = None
            elif 40 <= c <= 47:
                self._bg = c - 40
            elif 100 <= c <= 107:
                self._bg = c - 100 + 8
            elif c == 49:
                self._bg = None
            elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                value = codes[i + 2] if codes[i + 2] < 16 else None
                if c == 38:
                    self._fg = value
                else:
                    self._bg = value
                i += 2
            elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                i += 4  # true colour: not rendered, the text stays readable
            i += 1

    def _text(self, text: str) -> str:
        return html.escape(_CONTROL.sub("", text.replace("\r\n", "\n")), quote=False)

    def feed(self, data: bytes, *, final: bool = False) -> str:
        text = self._pending + self._decoder.decode(data, final)
        self._pending = ""
        if not final:
            tail = _PARTIAL.search(text)
            if tail is not None and tail.group(0):
                self._pending = tail.group(0)
                text = text[: tail.start()]
        out: list[str] = []
        classes = self._classes()
        # Each piece is well-formed HTML on its own: colours carried over from the
        # previous piece are reopened here and every span is closed at the end.
        self._open = bool(classes)
        if classes:
            out.append(f'<span class="{classes}">')
        last = 0
        for match in _ESCAPE.finditer(text):
            out.append(self._text(text[last : match.start()]))
            last = match.end()
            if match.group(2) == "m":
                if self._open:
                    out.append("</span>")
                self._sgr(match.group(1) or "0")
                classes = self._classes()
                self._open = bool(classes)
                if classes:
                    out.append(f'<span class="{classes}">')
        out.append(self._text(text[last:]))
        if self._open:
            out.append("</span>")
            self._open = False
        return "".join(out)


def render_log(data: bytes) -> str:
    """One complete piece of log as HTML."""
    return AnsiRenderer().feed(data, final=True)
