"""Reading a stored JSON column so that one bad row never fails a listing.

The API refuses at the door what no store can hold or response carry, but a row
written by an older version (which stored ``"\\ud800"`` escapes) or straight into the
database may still hold a lone UTF-16 surrogate, or text that is not JSON at all.
Such a row is shown, marked, among the others: each lone surrogate becomes U+FFFD
(the replacement character) and a value that does not parse becomes
``{"!unreadable": why}``."""

from __future__ import annotations

import json
import re
from typing import Any

UNREADABLE = "!unreadable"
REPLACEMENT = "\ufffd"

# An escape of a surrogate; a pair is fine (json.loads joins it), only a lone one is not.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def read_stored_json(text: str | bytes | None, what: str) -> Any:
    """The value of the JSON ``text`` stored as ``what`` (a run's conf, a task's output),
    fit to serve; see the module docstring. None stays None."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:
        return {UNREADABLE: f"the stored {what} is not JSON ({type(exc).__name__})"}
    if not _SURROGATE_ESCAPE.search(text):
        return value
    dumped = json.dumps(value, ensure_ascii=False)
    if not _SURROGATE.search(dumped):
        return value  # only well-formed pairs
    return json.loads(_SURROGATE.sub(REPLACEMENT, dumped))


def read_stored_conf(text: str | None) -> dict[str, Any]:
    """A run's conf: always a mapping, as the runs it starts expect."""
    value = read_stored_json(text, "conf")
    if value is None:
        return {}
    return value if isinstance(value, dict) else {UNREADABLE: "the stored conf is no mapping"}
