"""A spec that validates round-trips through the real store (SQLite and PostgreSQL),
with every number and date at the edge of what a DAG may set; its runs store too."""

from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.dagfile.loader import parse_dag
from leoflow.dagfile.problems import DagFileError
from leoflow.domain.catalogue import CatalogueEntry, parse_spec
from leoflow.domain.dag import MAX_ACTIVE_LIMIT
from leoflow.domain.mapping import MAX_MAP_ITEMS
from leoflow.domain.timebounds import INT32_MAX, LATEST_STAMP, MAX_DURATION_SECONDS
from leoflow.store import Store
from leoflow.store.rows import TaskSeed

DAYS = int(MAX_DURATION_SECONDS // 86400)
EDGES = f"""\
dag_id: edges
schedule: '59 23 31 12 *'
timezone: Pacific/Kiritimati
start_date: START
catchup: true
max_active_runs: {MAX_ACTIVE_LIMIT}
max_active_tasks: {MAX_ACTIVE_LIMIT}
deadline: {DAYS}d
run_timeout: {MAX_DURATION_SECONDS}
tasks:
  high:
    command: 'true'
    priority: {INT32_MAX}
    pool_slots: {INT32_MAX}
    retries: 100
    retry_delay: {DAYS}d
    timeout: {DAYS}d
    max_map_items: {MAX_MAP_ITEMS}
    map_over: [1.0e+308, -9223372036854775808, 123456789012345678901234567890]
    execution:
      termination_grace_period_seconds: {2**63 - 1}
      tolerations: [{{key: k, operator: Exists, toleration_seconds: {-(2**63)}}}]
  low: {{command: 'true', priority: {-INT32_MAX}, depends_on: [high]}}
"""


@pytest.mark.parametrize("start", ["1900-01-01T00:00:00Z", "9998-12-31T23:59:59.999999+00:00"])
async def test_a_spec_at_the_edges_round_trips_and_its_run_stores(store: Store, start: str) -> None:
    spec = parse_dag(EDGES.replace("START", start), Path("edges.yaml"))
    entry = CatalogueEntry.of(spec, fileloc="edges.yaml", source=None)
    await store.upsert_dag(
        "edges",
        fileloc=entry.fileloc,
        spec_json=entry.spec_json,
        spec_hash=entry.spec_hash,
        source=None,
    )
    (digest, text) = (await store.get_dag_specs(["edges"]))["edges"]
    assert digest == entry.spec_hash
    assert parse_spec(text) == spec
    assert spec.start_date is not None
    for logical_date in (spec.start_date.timestamp(), LATEST_STAMP - 1):
        seeds = [
            TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
            for t in spec.tasks.values()
        ]
        row, tis = await store.create_run_with_tasks(
            "edges",
            None,
            run_type="scheduled",
            logical_date=logical_date,
            conf={},
            tasks=seeds,
            epoch=None,
        )
        assert row.logical_date == logical_date
        stored = {ti.task_id: (ti.priority, ti.pool_slots, ti.max_tries) for ti in tis}
        assert stored == {"high": (INT32_MAX, INT32_MAX, 101), "low": (-INT32_MAX, 1, 1)}


@pytest.mark.parametrize(
    ("field", "value", "bound"),
    [
        ("priority", INT32_MAX + 1, "less than or equal to 2147483647"),
        ("priority", -INT32_MAX - 1, "greater than or equal to -2147483647"),
        ("pool_slots", 10**30, "less than or equal to 2147483647"),
        ("max_map_items", MAX_MAP_ITEMS + 1, f"less than or equal to {MAX_MAP_ITEMS}"),
        ("retries", 101, "less than or equal to 100"),
        ("retry_delay", f"{DAYS + 1}d", "the limit"),
        ("timeout", MAX_DURATION_SECONDS * 2, "the limit"),
    ],
)
def test_a_number_beyond_the_store_or_the_timers_is_a_load_error(
    field: str, value: object, bound: str
) -> None:
    text = f"dag_id: d\ntasks:\n  a:\n    command: 'true'\n    {field}: {value}\n"
    with pytest.raises(DagFileError) as info:
        parse_dag(text, Path("n.yaml"))
    (problem,) = info.value.problems
    assert (problem.field, problem.line) == (f"tasks.a.{field}", 5)
    assert bound in problem.message
