"""Tables for people: columns padded to fit, cells shown escaped.

Cells come from DAGs, tasks and the server (ids, messages), so control characters
are shown escaped rather than obeyed by the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from leoflow.domain.printable import printable

# A column: its header, and the item's key or a function of the item.
Column = tuple[str, str | Callable[[Mapping[str, Any]], object]]


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [["-" if cell is None else printable(str(cell)) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def table_of(items: Iterable[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    """A table of API items, one row each, ``columns`` picking the cells."""
    rows = [[get(item) if callable(get) else item[get] for _, get in columns] for item in items]
    return table([header for header, _ in columns], rows)
