"""What a producing task's success records: an event per asset, metadata from its output."""

from __future__ import annotations

import json

from leoflow.domain.assets.events import EXTRA_LIMIT, produced_events

PRODUCES = ("duckdb://wh/main.orders", "orders_landed")


def out(metadata: object) -> str:
    return json.dumps({"asset_metadata": metadata, "other": 1})


def test_each_produced_asset_gets_an_event_with_its_own_metadata() -> None:
    events, problem = produced_events(PRODUCES, out({"DuckDB://WH/main.orders": {"rows": 7}}))
    assert problem is None
    assert events == [("duckdb://wh/main.orders", '{"rows":7}'), ("orders_landed", None)]
    assert produced_events(PRODUCES, None) == ([(u, None) for u in PRODUCES], None)
    assert produced_events(PRODUCES, "[1, 2]") == ([(u, None) for u in PRODUCES], None)
    assert produced_events((), out({"x": {}})) == ([], None)


def test_refused_metadata_records_nothing_and_says_why() -> None:
    big = {"orders_landed": {"blob": "x" * EXTRA_LIMIT}}
    for metadata, fragment in [
        (big, "the limit is 16384 bytes"),
        ({"orders_landed": [1]}, "must be a JSON object"),
        ({"not_mine": {}}, "which the task does not produce"),
        ({"bad uri": {}}, "no spaces"),
        ([1], "must map produced assets"),
    ]:
        events, problem = produced_events(PRODUCES, out(metadata))
        assert events == [] and problem is not None and fragment in problem, problem
