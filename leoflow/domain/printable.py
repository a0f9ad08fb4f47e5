"""Text from DAG files and tasks, made safe to print on a terminal.

A terminal obeys control characters and escape sequences: a task id or an error
message carrying ESC could clear the screen, retitle the window or write to the
clipboard (OSC 52). Names, reasons and messages are shown with every control
character escaped. A task's own output keeps its colours (SGR sequences) on a
terminal, since coloured logs are legitimate, and loses every other sequence.
"""

from __future__ import annotations

import codecs
import re

# C0, DEL, C1, and the bidirectional overrides that can make text read differently
# from what it is ("Trojan source").
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# What a task's output may keep on a terminal: newline, tab, carriage return
# (progress bars), backspace, and colour/style sequences ESC [ params m.
_LOG_UNSAFE = re.compile(
    r"\x1b\[[0-9;:]*m|[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)
# An escape sequence cut by a chunk boundary: held back until the next chunk.
_PARTIAL_SGR = re.compile(r"\x1b(\[[0-9;:]*)?$")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_UNSAFE_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``).

    One line unless ``lines``, which keeps newlines (a multi-line error message).
    """
    unsafe = _UNSAFE_BUT_NEWLINE if lines else _UNSAFE
    if unsafe.search(text) is None:
        return text
    return unsafe.sub(lambda m: _escape(m.group()), text)


def _log_sub(match: re.Match[str]) -> str:
    found = match.group()
    return found if len(found) > 1 else _escape(found)


class TerminalLog:
    """Feeds a task's log bytes, chunk by chunk, to a terminal.

    Invalid UTF-8 is shown as ``\\xNN`` (a raw 0x9b byte is CSI to some terminals);
    a character or colour sequence split between chunks is held until it completes.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        self._held = ""

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        text = self._held + self._decoder.decode(data, final)
        self._held = ""
        if not final and (partial := _PARTIAL_SGR.search(text[-64:])) is not None:
            cut = len(text) - (len(text[-64:]) - partial.start())
            text, self._held = text[:cut], text[cut:]
        return _LOG_UNSAFE.sub(_log_sub, text).encode("utf-8")

    def end(self) -> bytes:
        return self.feed(b"", final=True)
