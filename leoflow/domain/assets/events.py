"""What a producing task's successful try records: one event per asset it produces.

Metadata rides the task's output channel (``$LEOFLOW_OUTPUT``, leoflow.domain.outputs):
an output that is a JSON object with an ``asset_metadata`` key gives each produced
asset a JSON object of its own, at most ``EXTRA_LIMIT`` bytes:

    {"asset_metadata": {"duckdb://warehouse/main.orders": {"rows": 1200}}}

Keys are asset URIs as the task declares them (normalised the same way). A key the
task does not produce, a value that is not an object, or one over the limit fails the
try (``output_invalid``) and records no event: nothing half-created.
"""

from __future__ import annotations

import json
from typing import Any

from leoflow.domain.assets.uri import AssetUriError, normalize_uri

EXTRA_LIMIT = 16 * 1024
# An asset-triggered run's id starts so (leoflow.domain.run_ids), and its tasks get the
# events that triggered it as JSON in this variable.
ASSET_RUN_PREFIX = "asset__"
TRIGGERING_ENV = "LEOFLOW_TRIGGERING_ASSET_EVENTS"
METADATA_KEY = "asset_metadata"


def extra_problem(extra: object, what: str) -> str | None:
    """Why ``extra`` cannot be an event's metadata, or None (``what`` names it)."""
    if not isinstance(extra, dict):
        return f"{what} must be a JSON object, got {type(extra).__name__}"
    size = len(extra_text(extra).encode("utf-8", errors="surrogatepass"))
    if size > EXTRA_LIMIT:
        return f"{what} is {size} bytes; the limit is {EXTRA_LIMIT} bytes (16 KB)"
    return None


def extra_text(extra: dict[str, Any]) -> str:
    return json.dumps(extra, separators=(",", ":"), sort_keys=True)


def produced_events(
    produces: tuple[str, ...], output: str | None
) -> tuple[list[tuple[str, str | None]], str | None]:
    """``([(uri, metadata JSON or None)], None)`` for a successful try of a task that
    produces ``produces``, or ``([], why)`` when its output's metadata is refused."""
    if not produces:
        return [], None
    found: dict[str, Any] = {}
    try:
        value = json.loads(output) if output else None
    except ValueError:
        value = None  # the output's own check says so
    if isinstance(value, dict) and METADATA_KEY in value:
        given = value[METADATA_KEY]
        if not isinstance(given, dict):
            return [], f"the output's {METADATA_KEY} must map produced assets to JSON objects"
        for key, extra in given.items():
            try:
                uri = normalize_uri(key)
            except AssetUriError as exc:
                return [], f"the output's {METADATA_KEY} names {key!r}: {exc}"
            if uri not in produces:
                return [], (
                    f"the output's {METADATA_KEY} names {key!r}, which the task does not "
                    f"produce (produces: {', '.join(produces)})"
                )
            problem = extra_problem(extra, f"the output's {METADATA_KEY} for {key!r}")
            if problem:
                return [], problem
            found[uri] = extra
    return [(uri, extra_text(found[uri]) if uri in found else None) for uri in produces], None


def triggering_json(events: list[dict[str, Any]]) -> str:
    """The triggering events as the task sees them: a JSON list, oldest first."""
    return json.dumps(events, separators=(",", ":"), sort_keys=True)
