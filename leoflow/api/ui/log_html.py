"""A log's bytes as numbered lines of HTML, and which bytes make a page of it.

Each line is ``<span class="ll" id="L120">`` with an empty ``a.ln`` whose number
CSS draws (``data-n``), so ``#L120`` links to it and copying the text copies no
numbers. Pages and streamed pieces hold whole lines, so the numbers stay right.
"""

from __future__ import annotations

from dataclasses import dataclass

from leoflow.api.log_lines import Read, lines_before, start_of_line
from leoflow.api.ui.ansi import AnsiRenderer

PAGE = 64 * 1024


def render_lines(data: bytes, first: int, renderer: AnsiRenderer | None = None) -> str:
    """``data`` (whole lines, the last one maybe unended) numbered from ``first``."""
    renderer = renderer or AnsiRenderer()
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    out = []
    for n, part in enumerate(parts, first):
        out.append(
            f'<span class="ll" id="L{n}"><a class="ln" href="#L{n}" data-n="{n}" '
            f'aria-label="line {n}"></a>{renderer.feed(part)}\n</span>'
        )
    return "".join(out)


def whole_lines(data: bytes, *, ended: bool) -> bytes:
    """``data`` up to its last line end, unless ``ended`` (nothing follows it) or it
    holds no line end at all (one line longer than a page: shown in pieces)."""
    if ended:
        return data
    cut = data.rfind(b"\n")
    return data if cut < 0 else data[: cut + 1]


@dataclass(frozen=True, slots=True)
class Slice:
    start: int
    data: bytes
    first_line: int

    @property
    def end(self) -> int:
        return self.start + len(self.data)


async def _from_line_start(read: Read, start: int, end: int) -> tuple[int, bytes]:
    """[start, end) moved forward to begin at a line: never inside a UTF-8 sequence."""
    data = await read(start, end - start)
    if start > 0:
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            data, start = data[cut + 1 :], start + cut + 1
    return start, data


async def page_before(read: Read, size: int, before: int | None, over: bool) -> Slice:
    """The page that ends at ``before`` (default: the log's end), in whole lines."""
    end = size if before is None else min(before, size)
    start, data = await _from_line_start(read, max(0, end - PAGE), end)
    # An earlier page ends where the page after it starts: at a line, or inside one
    # longer than a page; only the log's live end is cut back to a line.
    data = whole_lines(data, ended=before is not None or (over and end == size))
    return Slice(start, data, await lines_before(read, start) + 1)


async def page_after(read: Read, size: int, after: int, over: bool) -> Slice:
    """The page that starts at ``after`` (a line start), in whole lines."""
    after = min(after, size)
    data = await read(after, min(PAGE, size - after))
    data = whole_lines(data, ended=over and after + len(data) == size)
    return Slice(after, data, await lines_before(read, after) + 1)


async def page_at_line(read: Read, size: int, number: int, over: bool) -> Slice | None:
    """A page holding line ``number`` near its top; None past the last line."""
    at = await start_of_line(read, size, number)
    if at is None:
        return None
    start, data = await _from_line_start(read, max(0, at - PAGE // 8), min(size, at + PAGE))
    data = whole_lines(data, ended=over and start + len(data) == size)
    # The lines between the page's start and line ``number``'s: no second scan.
    return Slice(start, data, number - data.count(b"\n", 0, at - start))
