"""Catchup from a far start_date keeps a bounded number of runs queued, and says so."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from leoflow.domain.states import RunState
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag


async def test_catchup_from_a_year_ago_keeps_at_most_the_cap_queued(
    make_scheduler: SchedulerFactory, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    start = (datetime.now(UTC) - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec = dag(
        f"dag_id: backlog\nschedule: '* * * * *'\ncatchup: true\nstart_date: '{start}'\n"
        "tasks: {a: {command: 'true'}}\n"
    )
    # Not started: only the run-creation step runs, so nothing leaves the queue.
    scheduler = await make_scheduler(spec, max_catchup_runs=5)
    caplog.set_level(logging.INFO, logger="leoflow.scheduler")
    for _ in range(3):
        await scheduler._poll.run()
        queued = await store.list_runs(states=[RunState.QUEUED], limit=10_000)
        assert len(queued) == 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "DAG backlog: catchup owes more runs than the cap allows" in warnings[0]
    assert "LEOFLOW_MAX_CATCHUP_RUNS" in warnings[0]
    # The five are the oldest fire times, one minute apart from start_date on.
    dates = sorted(r.logical_date or 0.0 for r in queued)
    assert [b - a for a, b in pairwise(dates)] == [60.0] * 4
