"""The graph layout: no overlapping boxes, every edge points forward, deterministic."""

from __future__ import annotations

import random

import pytest

from leoflow.domain.graph_layout import GraphLayout, layout_graph


def _random_dag(n: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    names = [f"task_{i:03d}" for i in range(n)]
    return {
        name: sorted(rng.sample(names[:i], k=min(i, rng.randint(0, 3)))) if i else []
        for i, name in enumerate(names)
    }


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


def _check(layout: GraphLayout, graph: dict[str, list[str]]) -> None:
    assert sorted(n.task_id for n in layout.nodes) == sorted(graph)
    boxes = [(n.x, n.y, n.width, n.height) for n in layout.nodes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not _overlap(a, b), (a, b)
        assert a[0] >= 0 and a[1] >= 0
        assert a[0] + a[2] <= layout.width and a[1] + a[3] <= layout.height
    by_id = {n.task_id: n for n in layout.nodes}
    want = sorted((u, t) for t, ups in graph.items() for u in ups)
    assert sorted((e.source, e.target) for e in layout.edges) == want
    for edge in layout.edges:
        source, target = by_id[edge.source], by_id[edge.target]
        assert source.layer < target.layer
        xs = [p[0] for p in edge.points]
        assert xs == sorted(xs) and xs[0] < xs[-1], edge
        assert edge.points[0] == (source.x + source.width, source.y + source.height / 2)
        assert edge.points[-1] == (target.x, target.y + target.height / 2)
        # A skipping edge passes no node box in the layers between.
        for x, y in edge.points[1:-1]:
            for n in layout.nodes:
                assert not (n.x <= x <= n.x + n.width and n.y <= y <= n.y + n.height), (edge, n)


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_of_200_tasks(seed: int) -> None:
    graph = _random_dag(200, seed)
    _check(layout_graph(graph), graph)


def test_the_same_graph_in_another_order_gives_the_same_layout() -> None:
    graph = _random_dag(120, 42)
    shuffled = list(graph.items())
    random.Random(1).shuffle(shuffled)
    again = {t: list(reversed(ups)) for t, ups in shuffled}
    assert layout_graph(graph) == layout_graph(again)


def test_layers_follow_the_longest_path() -> None:
    graph = {"a": [], "b": ["a"], "c": ["b"], "d": ["a", "c"], "e": []}
    layout = layout_graph(graph)
    assert {n.task_id: n.layer for n in layout.nodes} == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 0}
    (skip,) = [e for e in layout.edges if (e.source, e.target) == ("a", "d")]
    assert len(skip.points) == 4  # through layers 1 and 2
    _check(layout, graph)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
def test_a_wide_fan_keeps_every_box_apart() -> None:
    graph = {
        "start": [],
        **{f"t{i}": ["start"] for i in range(300)},
        "end": [f"t{i}" for i in range(300)],
    }
    _check(layout_graph(graph), graph)


def test_a_cycle_and_an_unknown_upstream_are_errors() -> None:
    with pytest.raises(ValueError, match="cycle"):
        layout_graph({"a": ["b"], "b": ["a"]})
    with pytest.raises(ValueError, match="unknown"):
        layout_graph({"a": ["ghost"]})


def test_an_empty_graph() -> None:
    layout = layout_graph({})
    assert layout.nodes == () and layout.edges == ()
