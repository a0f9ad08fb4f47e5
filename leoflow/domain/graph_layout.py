"""A left-to-right layered layout of a DAG's tasks, for the web UI's graph.

Pure and deterministic: the same graph gives the same picture whatever order its
tasks come in. Layers by longest path from the sources (every edge points to a
later layer), edges that skip layers pass through dummy points so that they are
routed between nodes rather than over them, and a few barycenter sweeps reduce
crossings. Ties are broken by task id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

NODE_WIDTH = 170.0
NODE_HEIGHT = 34.0
LAYER_GAP = 56.0
ROW_GAP = 14.0
MARGIN = 16.0
_SWEEPS = 8


@dataclass(frozen=True, slots=True)
class NodeBox:
    task_id: str
    layer: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class EdgePath:
    source: str
    target: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class GraphLayout:
    width: float
    height: float
    nodes: tuple[NodeBox, ...]
    edges: tuple[EdgePath, ...]


def _layers(upstreams: Mapping[str, Sequence[str]]) -> dict[str, int]:
    layer: dict[str, int] = {}
    remaining = {t: set(ups) for t, ups in upstreams.items()}
    for t, ups in remaining.items():
        missing = ups - remaining.keys()
        if missing:
            raise ValueError(f"task {t!r} depends on unknown task(s) {sorted(missing)}")
    while remaining:
        ready = sorted(t for t, ups in remaining.items() if not ups & remaining.keys())
        if not ready:
            raise ValueError(f"dependency cycle among {sorted(remaining)}")
        for t in ready:
            layer[t] = 1 + max((layer[u] for u in upstreams[t]), default=-1)
            del remaining[t]
    return layer


def layout_graph(upstreams: Mapping[str, Sequence[str]]) -> GraphLayout:
    """Boxes and edge polylines for ``task -> its upstreams``; ValueError on a cycle."""
    layer = _layers(upstreams)
    # Vertices are task ids and dummy points ("\0" prefix cannot be a task id).
    vlayer: dict[str, int] = dict(layer)
    succ: dict[str, list[str]] = {t: [] for t in layer}
    pred: dict[str, list[str]] = {t: [] for t in layer}
    chains: list[tuple[str, str, list[str]]] = []
    for target in sorted(upstreams):
        for source in sorted(set(upstreams[target])):
            chain = [source]
            for step in range(layer[source] + 1, layer[target]):
                dummy = f"\0{source}\0{target}\0{step}"
                vlayer[dummy] = step
                succ[dummy], pred[dummy] = [], []
                chain.append(dummy)
            chain.append(target)
            for a, b in pairwise(chain):
                succ[a].append(b)
                pred[b].append(a)
            chains.append((source, target, chain))
    depth = max(vlayer.values(), default=-1) + 1
    rows: list[list[str]] = [[] for _ in range(depth)]
    for v in sorted(vlayer, key=lambda v: (v.startswith("\0"), v)):
        rows[vlayer[v]].append(v)
    pos = {v: i for row in rows for i, v in enumerate(row)}

    def sweep(order: range, neighbours: dict[str, list[str]]) -> None:
        for i in order:
            row = rows[i]

            def key(v: str, row: list[str] = row) -> tuple[float, int]:
                ns = neighbours[v]
                centre = sum(pos[n] for n in ns) / len(ns) if ns else float(pos[v])
                return (centre, pos[v])

            row.sort(key=key)
            for j, v in enumerate(row):
                pos[v] = j

    for _ in range(_SWEEPS // 2):
        sweep(range(1, depth), pred)
        sweep(range(depth - 2, -1, -1), succ)

    pitch = NODE_HEIGHT + ROW_GAP
    tallest = max((len(r) for r in rows), default=0)
    y: dict[str, float] = {}
    # Rows packed and centred: a wide layer stays one compact column to scroll
    # through, rather than spread out to meet its neighbours.
    for row in rows:
        offset = (tallest - len(row)) * pitch / 2
        for j, v in enumerate(row):
            y[v] = offset + j * pitch
    top = min(y.values(), default=0.0)
    for v in y:
        y[v] = round(y[v] - top + MARGIN, 1)

    def x_of(v: str) -> float:
        return MARGIN + vlayer[v] * (NODE_WIDTH + LAYER_GAP)

    nodes = tuple(
        NodeBox(t, layer[t], x_of(t), y[t], NODE_WIDTH, NODE_HEIGHT)
        for t in sorted(layer, key=lambda t: (layer[t], y[t], t))
    )
    edges = []
    half = NODE_HEIGHT / 2
    for source, target, chain in chains:
        points = [(x_of(source) + NODE_WIDTH, y[source] + half)]
        for v in chain[1:-1]:
            points.append((x_of(v) + NODE_WIDTH / 2, y[v] + half))
        points.append((x_of(target), y[target] + half))
        edges.append(EdgePath(source, target, tuple(points)))
    width = MARGIN * 2 + depth * NODE_WIDTH + max(0, depth - 1) * LAYER_GAP
    height = max((v + NODE_HEIGHT for v in y.values()), default=0.0) + MARGIN
    return GraphLayout(round(width, 1), round(height, 1), nodes, tuple(edges))
