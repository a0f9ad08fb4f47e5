"""A live update sends what changed since the last one: regions by digest, the grid's
squares while its frame holds, the graph's nodes."""

from __future__ import annotations

import json
from typing import Any

from leoflow.api.ui.live_delta import Sent, digest, parse_known


def _full(
    squares: dict[tuple[str, str], str], nodes: dict[str, str], shape: str = "s1"
) -> dict[str, Any]:
    grid = "<table>" + "".join(squares.values()) + "</table>"
    return {
        "regions": {"dag_head": "<h1>big</h1>", "grid": grid},
        "cells": squares,
        "shape": shape,
        "nodes": {t: [st, None] for t, st in nodes.items()},
        "run": "r1",
        "lazy_graph": False,
    }


def test_a_page_drawn_with_the_same_state_gets_nothing_then_only_what_changed() -> None:
    squares = {("a", "r1"): "<td>a ok</td>", ("b", "r1"): "<td>b wait</td>"}
    first = _full(squares, {"a": "success", "b": "scheduled"})
    known = {name: digest(html) for name, html in first["regions"].items()}
    sent = Sent(digests=parse_known(json.dumps(known)))
    # The graph was not in the page's known set: its nodes come once, the rest not at all.
    update = sent.delta(first)
    assert update is not None and set(update) == {"nodes", "mapped", "run", "digests"}
    assert sent.delta(first) is None  # nothing changed: nothing sent

    second = _full({**squares, ("b", "r1"): "<td>b run</td>"}, {"a": "success", "b": "running"})
    update = sent.delta(second)
    assert update is not None
    assert update["cells"] == [["r1", "b", "<td>b run</td>"]]  # one square, not the grid
    assert "regions" not in update
    assert update["nodes"] == {"b": "running"}
    assert update["digests"]["grid"] == digest(second["regions"]["grid"])

    # A new run column (the frame changed): the grid is sent whole.
    third = _full(
        {**squares, ("b", "r1"): "<td>b run</td>"}, {"a": "success", "b": "running"}, "s2"
    )
    third["regions"]["grid"] += "<p>new run</p>"
    update = sent.delta(third)
    assert update is not None and "grid" in update["regions"] and "cells" not in update


def test_known_from_the_browser_is_bounded_and_anything_else_ignored() -> None:
    assert parse_known("not json") == {}
    assert parse_known("[1, 2]") == {}
    assert parse_known('{"grid": 5, "x": "abc"}') == {"x": "abc"}
    assert len(parse_known("{" + ",".join(f'"k{i}": "v"' for i in range(50)) + "}")) == 20


def test_a_try_that_started_and_ended_between_two_renders_still_switches_the_log() -> None:
    """The page switches to a new try's log when it reads both facts of the log; a try
    that ran whole between two renders changes only ``latest_try``."""

    def task_page(live: bool, latest: int) -> dict[str, Any]:
        return {"regions": {"task_head": "<h1>t</h1>"}, "log_live": live, "latest_try": latest}

    sent = Sent()
    assert sent.delta(task_page(False, 0)) is not None
    update = sent.delta(task_page(False, 1))
    assert update is not None
    assert (update["log_live"], update["latest_try"]) == (False, 1)
    assert sent.delta(task_page(False, 1)) is None
