"""The assets pages: every asset with its producers, consumers and last event; one
asset's history; the lineage graph across DAGs; and what an asset-scheduled DAG waits
for, shown on its page.

The lineage graph is laid out as the DAG graph is (``leoflow.domain.graph_layout``):
DAGs and assets are its nodes, an edge goes from a DAG to each asset one of its tasks
produces and from an asset to each DAG that consumes it or is scheduled on it.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any
from urllib.parse import quote

from fastapi import HTTPException
from markupsafe import Markup

from leoflow.api.assets import _assets, asset_waiting
from leoflow.api.auth import Principal
from leoflow.api.context import ApiContext
from leoflow.api.ui.fragments import _edge_path
from leoflow.api.ui.present import dag_url
from leoflow.domain.assets.uri import AssetUriError, normalize_uri
from leoflow.domain.assets.waiting import age_text
from leoflow.domain.graph_layout import layout_graph

HISTORY = 50
_LABEL_CHARS = 20
_DAG, _ASSET = "dag\0", "asset\0"
_ARROW = (
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" class="arrow"/></marker></defs>'
)


def asset_url(uri: str) -> str:
    return f"/assets/one?uri={quote(uri, safe='')}"


def _ago(at: float | None, now: float) -> str:
    return "none yet" if at is None else f"{age_text(now - at)} ago"


async def assets_view(ctx: ApiContext) -> dict[str, Any]:
    assets = sorted(await _assets(ctx), key=lambda a: a["uri"])
    return {"assets": assets, "asset_url": asset_url, "ago": _ago, "clock": time.time()}


async def asset_view(ctx: ApiContext, raw: str | None) -> dict[str, Any]:
    try:
        uri = normalize_uri(raw or "")
    except AssetUriError as exc:
        raise HTTPException(400, f"query parameter 'uri': {exc}") from None
    found = await _assets(ctx, uri)
    if not found:
        raise HTTPException(404, f"no DAG names asset {uri!r}")
    history = await ctx.store.list_asset_events(uri=uri, limit=HISTORY)
    return {
        "asset": found[0],
        "events": history,
        "shown": HISTORY,
        "asset_url": asset_url,
        "ago": _ago,
        "clock": time.time(),
    }


async def lineage_view(ctx: ApiContext) -> dict[str, Any]:
    upstreams: dict[str, set[str]] = {}
    for uri, dag_id, role, _task in await ctx.store.list_asset_refs():
        dag, asset = _DAG + dag_id, _ASSET + uri
        upstreams.setdefault(dag, set())
        upstreams.setdefault(asset, set())
        if role == "produces":
            upstreams[asset].add(dag)
        else:  # consumes, or scheduled on it
            upstreams[dag].add(asset)
    # A DAG that produces and consumes one asset would be a cycle: the producing edge wins.
    for node, ups in upstreams.items():
        if node.startswith(_DAG):
            ups -= {a for a in ups if node in upstreams.get(a, set())}
    layout = layout_graph({n: sorted(ups) for n, ups in upstreams.items()})
    last = await ctx.store.last_asset_events(
        [n.removeprefix(_ASSET) for n in upstreams if n.startswith(_ASSET)]
    )
    now = time.time()
    nodes = []
    for n in layout.nodes:
        is_dag = n.task_id.startswith(_DAG)
        name = n.task_id.split("\0", 1)[1]
        href = dag_url(name) if is_dag else asset_url(name)
        event = None if is_dag else last.get(name)
        seen = _ago(event.created_at if event is not None else None, now)
        title = f"DAG {name}" if is_dag else f"asset {name}: last event {seen}"
        label = name if len(name) <= _LABEL_CHARS else name[: _LABEL_CHARS - 1] + "\u2026"
        kind = "dag" if is_dag else "asset"
        icon = "\u25a3" if is_dag else "\u25c9"
        nodes.append(
            f'<a href="{escape(href)}" class="node-link" data-{kind}="{escape(name)}">'
            f'<g class="node lineage-{kind}" transform="translate({n.x},{n.y})">'
            f"<title>{escape(title)}</title>"
            f'<rect width="{n.width}" height="{n.height}" rx="{6 if is_dag else 17}"/>'
            f'<text class="ic" x="14" y="{n.height / 2 + 5}" text-anchor="middle">{icon}</text>'
            f'<text class="label" x="28" y="{n.height / 2 + 4.5}">{escape(label)}</text></g></a>'
        )
    edges = "\n".join(_edge_path(e) for e in layout.edges)
    w, h = layout.width, layout.height
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="Lineage of DAGs and '
        f'assets" width="{w}" height="{h}" viewBox="0 0 {w} {h}">{_ARROW}'
        f'<g class="viewport">{edges}\n{"".join(nodes)}</g></svg>'
    )
    return {
        "layout": layout,
        "svg": Markup(svg),
        "counts": (
            sum(n.startswith(_DAG) for n in upstreams),
            sum(n.startswith(_ASSET) for n in upstreams),
        ),
    }


async def dag_waiting(ctx: ApiContext, dag_id: str, who: Principal) -> dict[str, Any]:
    """The DAG page's "waiting for: orders (last event 3 h ago), customers (none yet)"
    line (the API's answer, ``asset_waiting``): None when the DAG is not
    asset-scheduled or its condition is met (a run is due)."""
    answer = await asset_waiting(dag_id, ctx, who)
    return {"asset_waiting": answer["waiting"], "asset_url": asset_url}
