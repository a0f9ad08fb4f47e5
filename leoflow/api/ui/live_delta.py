"""What a live update sends: only what changed since the last one on that stream.

A region is sent again only when its markup changed. The DAG page's grid, whose
frame (its runs, its rows) seldom changes while its squares do, sends the squares
that changed (``cells``), and its graph the nodes whose state changed. The page
itself says what it was drawn with (``known_of``: a digest per region, in a
``<meta>``); a stream starts from that, and a browser that reconnects sends back
the digests of what it holds, so neither a first update nor a reconnect resends
a 1,000-task page.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from leoflow.api.ui import pages
from leoflow.domain.cancelled import CANCELLED
from leoflow.domain.mapped_states import fold_items, with_items_folded

# A stream's ``known`` from the browser: bounded, anything else is ignored.
_KNOWN_KEYS = 20
_KEY_CHARS = 40
_DIGEST_CHARS = 64


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def full_payload(page: pages.Page, context: dict[str, Any]) -> dict[str, Any]:
    """Everything a page's live parts show now (``Sent.delta`` keeps what changed)."""
    payload: dict[str, Any] = {"regions": pages.render_regions(page, context)}
    if page.name == "dag":
        states, mapped = context["selected_states"], context["mapped"]
        gone = context["selected_cancelled"]  # failed by a cancel: shown as cancelled
        folded = {
            t: CANCELLED if t in gone else st.value
            for t, st in with_items_folded(states, mapped).items()
        }
        words = {t: items.words() for t, items in fold_items(states, mapped).items()}
        # Every task of the graph: one a run switch leaves out goes back to none.
        payload["nodes"] = {t: [folded.get(t, "none"), words.get(t)] for t in context["order"]}
        selected = context["selected"]
        payload["run"] = None if selected is None else selected.run_id
        payload["cells"] = context["grid_cells"]
        payload["shape"] = context["grid_shape"]
        payload["lazy_graph"] = context["lazy_graph"]
    if page.name == "task":
        payload["log_live"] = context["log_live"]
        payload["latest_try"] = context["ti"].try_number
    return payload


def _nodes_digest(nodes: dict[str, list[Any]], run: str | None) -> str:
    return digest(json.dumps([run, nodes], sort_keys=True))


def known_of(page: pages.Page, context: dict[str, Any]) -> str:
    """The digests of what the page is drawn with, as JSON (its ``live-known`` meta)."""
    full = full_payload(page, context)
    known = {name: digest(html) for name, html in full["regions"].items()}
    if "nodes" in full and not full["lazy_graph"]:
        known["nodes"] = _nodes_digest(full["nodes"], full["run"])
    return json.dumps(known, separators=(",", ":"))


def parse_known(raw: str) -> dict[str, str]:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in list(data.items())[:_KNOWN_KEYS]
        if isinstance(k, str)
        and isinstance(v, str)
        and len(k) <= _KEY_CHARS
        and len(v) <= _DIGEST_CHARS
    }


_EXTRAS = ("run", "log_live", "latest_try")


@dataclass
class Sent:
    """What one stream's browser holds: updated by each ``delta`` it is sent."""

    digests: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, list[Any]] | None = None
    run: str | None = None
    cells: dict[tuple[str, str], str] | None = None
    shape: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def delta(self, full: dict[str, Any]) -> dict[str, Any] | None:
        """The update to send for ``full``, or None when nothing changed."""
        out: dict[str, Any] = {}
        regions: dict[str, str] = {}
        for name, html in full["regions"].items():
            d = digest(html)
            if d == self.digests.get(name):
                continue
            self.digests[name] = d
            same_frame = self.cells is not None and full.get("shape") == self.shape
            if name == "grid" and "cells" in full and same_frame:
                old = self.cells or {}
                out["cells"] = [
                    [run, task, cell]
                    for (task, run), cell in full["cells"].items()
                    if old.get((task, run)) != cell
                ]
            else:
                regions[name] = html
        if "cells" in full:
            self.cells, self.shape = full["cells"], full["shape"]
        if regions:
            out["regions"] = regions
        if "nodes" in full:
            self._nodes(full, out)
        for key in _EXTRAS:
            if key in full and (key not in self.extras or self.extras[key] != full[key]):
                self.extras[key] = full[key]
                out[key] = full[key]
        # The log's two facts go together: a try that started and ended between two
        # renders changes only ``latest_try``, and the page reads both to switch logs.
        if "log_live" in out or "latest_try" in out:
            for key in ("log_live", "latest_try"):
                if key in full:
                    out[key] = full[key]
        if not out:
            return None
        out["digests"] = dict(self.digests)
        return out

    def _nodes(self, full: dict[str, Any], out: dict[str, Any]) -> None:
        nodes, run = full["nodes"], full["run"]
        now = _nodes_digest(nodes, run)
        if self.nodes is None or run != self.run:
            # First tick: the page's own nodes, if it was drawn with these.
            self.nodes = dict(nodes) if self.digests.get("nodes") == now else {}
            self.run = run
        changed = {t: v for t, v in nodes.items() if self.nodes.get(t) != v}
        self.nodes = dict(nodes)
        self.digests["nodes"] = now
        if changed:
            out["nodes"] = {t: v[0] for t, v in changed.items()}
            out["mapped"] = {t: v[1] for t, v in changed.items() if v[1] is not None}
            out["run"] = run
