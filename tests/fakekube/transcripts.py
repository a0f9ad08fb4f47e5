"""Read the captured apiserver transcripts and compare bodies modulo volatile values.

A transcript ``.txt`` holds ``### METHOD PATH``, optionally ``### request body: {...}``,
then the HTTP status line, headers, a blank line and the JSON body; a ``.jsonl`` holds
one watch event per line. :func:`normalise` replaces what differs between any two
servers (uids, timestamps, resourceVersions, managedFields) so the rest — the shape
and every meaningful value — can be compared with ``==``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIR = Path(__file__).parent / "transcripts"

_UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
_NUMBERS = re.compile(r"\d+")
VOLATILE_KEYS = {"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"}


@dataclass(frozen=True)
class Transcript:
    """One captured request/response pair."""

    name: str
    method: str | None
    path: str | None
    request_body: Any
    status: int
    body: Any


def load(path: Path) -> Transcript:
    """Parse a ``.txt`` transcript."""
    method = target = None
    request_body: Any = None
    lines = path.read_text().splitlines()
    i = 0
    while lines[i].startswith("###"):
        text = lines[i][3:].strip()
        if text.startswith("request body:"):
            request_body = json.loads(text.removeprefix("request body:").strip())
        else:
            method, _, target = text.partition(" ")
        i += 1
    status = int(lines[i].split()[1])
    blank = lines.index("", i)
    body = json.loads("\n".join(lines[blank + 1 :]))
    return Transcript(path.stem, method, target, request_body, status, body)


def load_events(path: Path) -> list[dict[str, Any]]:
    """Parse a ``.jsonl`` watch stream."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def normalise(value: Any, key: str = "") -> Any:
    """A copy with volatile values replaced by placeholders and managedFields dropped."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items() if k != "managedFields"}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        if key in VOLATILE_KEYS or _UID.match(value):
            return f"<{key or 'uid'}>"
        if _TIME.match(value):
            return "<time>"
        if key == "message":
            return _NUMBERS.sub("N", value)
    return value
