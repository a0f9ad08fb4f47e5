"""What is wrong with a DAG file, said so its author can act on it: the problem (field
path, message, line) and the error that carries every problem found in one file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leoflow.dagfile.hints import did_you_mean
from leoflow.domain.printable import printable


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    line: int | None = None

    def render(self, path: Path | str) -> str:
        """One line for a terminal: control characters from the file are shown escaped."""
        where = f"{path}:{self.line}" if self.line else str(path)
        field = f" {self.field}:" if self.field else ""
        return printable(f"{where}:{field} {self.message}")


class DagFileError(Exception):
    """A DAG file that cannot be used; ``problems`` lists every reason found."""

    def __init__(self, path: Path, problems: Iterable[Problem]) -> None:
        self.path = path
        # In the file's order; a problem of the whole file (no line) first.
        self.problems = tuple(sorted(problems, key=lambda p: p.line or 0))
        super().__init__("\n".join(p.render(path) for p in self.problems))


class DagFileGone(DagFileError):
    """The file vanished between the folder's listing and its reading: not an error of
    the folder, it is simply not there this pass."""


def located(lines: dict[tuple[str, ...], int], loc: tuple[str, ...], message: str) -> Problem:
    """A problem at the line of ``loc``, or of the nearest field above it that has one."""
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return Problem(".".join(loc), message, lines[loc[:cut]])
    return Problem(".".join(loc), message)


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def pydantic_problem(err: Any, prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], str]:
    loc = prefix + tuple(str(p) for p in err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        return loc, "unknown field" + did_you_mean(loc)
    if kind == "missing":
        return loc, "required field is missing"
    message = str(err["msg"])
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if kind not in {"value_error", "assertion_error"} and "input" in err:
        message = f"{message[0].lower()}{message[1:]}, got {_describe(err['input'])}"
    return loc, message
