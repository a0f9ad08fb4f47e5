"""``leoflow assets`` through the real CLI against a served API: emit, list, show,
events, and the why-waiting answer of an asset-scheduled DAG."""

from __future__ import annotations

import json

import pytest

from leoflow.api.server import RunningApi
from leoflow.store import Store
from tests.integration.api.conftest import put_dag
from tests.integration.api.test_assets_api import CONSUMER, PRODUCER
from tests.integration.api.test_cli import cli, live

__all__ = ["live"]
pytestmark = pytest.mark.slow  # the real CLI in subprocesses


async def test_emit_list_show_events_and_why(live: RunningApi, store: Store) -> None:
    await put_dag(store, PRODUCER)
    await put_dag(store, CONSUMER)
    code, out, err = await cli(live, "assets", "why", "marts", role="viewer")
    assert code == 0, err
    assert out.strip() == (
        "marts: waiting for: duckdb://wh/main.orders (none yet), customers (none yet)"
    )
    code, out, err = await cli(
        live, "assets", "emit", "DuckDB://WH/main.orders", "--extra", '{"rows": 3}',
        "--key", "k1", role="operator",
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("asset duckdb://wh/main.orders: event ") and "recorded" in out
    resend = ("assets", "emit", "duckdb://wh/main.orders", "--extra", '{"rows":3}', "--key", "k1")
    code, out, _ = await cli(live, *resend)
    assert code == 0 and "already recorded" in out
    code, out, err = await cli(live, *resend[:3], "--key", "k1")  # another event, same key
    assert code != 0 and "409" in err
    code, out, err = await cli(live, "assets", "emit", "nobody_names_it", role="operator")
    assert code != 0 and "404" in err and "no DAG produces" in err
    code, out, err = await cli(live, "assets", "emit", "customers", role="viewer")
    assert code != 0 and "403" in err
    code, out, _ = await cli(live, "assets", "why", "marts", role="viewer")
    assert out.strip().startswith("marts: waiting for: customers (none yet)")
    code, out, _ = await cli(live, "assets", "list", role="viewer")
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "land.orders" in lines["duckdb://wh/main.orders"]
    assert "marts" in lines["duckdb://wh/main.orders"]
    assert lines["customers"].rstrip().endswith("none yet")
    assert "s ago" in lines["duckdb://wh/main.orders"]
    code, out, _ = await cli(live, "assets", "show", "duckdb://wh/main.orders", "--json")
    shown = json.loads(out)
    assert [e["extra"] for e in shown["events"]] == [{"rows": 3}]
    code, out, _ = await cli(live, "assets", "events", "--json")
    assert [e["uri"] for e in json.loads(out)["events"]] == ["duckdb://wh/main.orders"]
    code, _, err = await cli(live, "assets", "frobnicate")
    assert code == 2 and "usage: leoflow assets" in err
