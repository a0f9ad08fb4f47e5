"""A stored log by its lines: search it, find where line N starts, count the lines
before an offset. Each reads the log in blocks through ``read(offset, limit)``, so a
16 MB log is never held whole, in the server nor in a page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Read = Callable[[int, int], Awaitable[bytes]]

BLOCK = 1024 * 1024
# A line longer than this is searched in pieces (a match across a piece's end is
# missed) rather than held whole.
LONGEST_LINE = 4 * 1024 * 1024
SHOWN_BYTES = 400  # of a matching line, in a result


@dataclass(frozen=True, slots=True)
class Match:
    line: int  # 1-based
    offset: int  # where the line starts
    text: bytes  # the line, clipped at SHOWN_BYTES


@dataclass(frozen=True, slots=True)
class Found:
    matches: list[Match]
    truncated: bool  # more lines match than were listed


async def search(read: Read, size: int, needle: bytes, *, limit: int, fold: bool) -> Found:
    """The first ``limit`` lines containing ``needle`` (ASCII case folded if ``fold``),
    each listed once."""
    if fold:
        needle = needle.lower()
    matches: list[Match] = []
    line, base, pos, buf = 1, 0, 0, b""
    while pos < size and len(matches) <= limit:
        block = await read(pos, min(BLOCK, size - pos))
        if not block:
            break
        pos += len(block)
        buf += block
        cut = len(buf) if pos >= size else buf.rfind(b"\n") + 1
        if cut == 0:
            if len(buf) < LONGEST_LINE:
                continue
            cut = len(buf)
        region = buf[:cut]
        hay = region.lower() if fold else region
        at = counted = 0
        while len(matches) <= limit:
            hit = hay.find(needle, at)
            if hit < 0:
                break
            start = region.rfind(b"\n", 0, hit) + 1
            end = region.find(b"\n", hit)
            end = cut if end < 0 else end
            line += region.count(b"\n", counted, start)
            counted = start
            matches.append(Match(line, base + start, region[start : min(end, start + SHOWN_BYTES)]))
            at = end + 1
        line += region.count(b"\n", counted)
        base += cut
        buf = buf[cut:]
    return Found(matches[:limit], len(matches) > limit)


async def lines_before(read: Read, offset: int) -> int:
    """How many lines end before ``offset`` (the number of the line there, minus 1)."""
    count, pos = 0, 0
    while pos < offset:
        block = await read(pos, min(BLOCK, offset - pos))
        if not block:
            break
        count += block.count(b"\n")
        pos += len(block)
    return count


async def start_of_line(read: Read, size: int, number: int) -> int | None:
    """The offset where line ``number`` (1-based) starts; None past the last line."""
    if number == 1:
        return 0 if size else None
    seen, pos = 0, 0
    while pos < size:
        block = await read(pos, min(BLOCK, size - pos))
        if not block:
            break
        here = block.count(b"\n")
        if seen + here >= number - 1:
            at = -1
            for _ in range(number - 1 - seen):
                at = block.index(b"\n", at + 1)
            start = pos + at + 1
            return start if start < size else None
        seen += here
        pos += len(block)
    return None
