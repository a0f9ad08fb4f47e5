"""Run ids made up for a trigger without one never refuse the trigger: two runs of one
DAG in the same second that draw the same random part (a loop of a thousand triggers
did, about once in thirty) get different ids, on the scheduler's path and the API's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from types import SimpleNamespace

import pytest

from leoflow.domain import run_ids
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag


@pytest.fixture
def same_draw_twice(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    draws = iter(["cafe0001", "cafe0001", "cafe0002", "cafe0003", "cafe0004"])
    drawn: list[str] = []

    def token_hex(_: int) -> str:
        drawn.append(next(draws))
        return drawn[-1]

    monkeypatch.setattr(run_ids, "secrets", SimpleNamespace(token_hex=token_hex))
    # Both triggers in one second, whatever the clock says.
    one_second = SimpleNamespace(fromtimestamp=lambda t, tz: datetime(2026, 1, 1, tzinfo=tz))
    monkeypatch.setattr(run_ids, "datetime", one_second)
    yield drawn


async def test_a_drawn_id_taken_in_the_same_second_is_drawn_again(
    make_scheduler: SchedulerFactory, store: Store, same_draw_twice: list[str]
) -> None:
    spec = dag('dag_id: twice\ntasks:\n  a: {command: "true"}\n')
    scheduler = await make_scheduler(spec)
    first = await scheduler.trigger("twice")
    second = await scheduler.trigger("twice")
    assert first.run_id.endswith("_cafe0001")
    assert second.run_id.endswith("_cafe0002"), second.run_id
    assert same_draw_twice == ["cafe0001", "cafe0001", "cafe0002"]
    assert {r.run_id for r in await store.list_runs(dag_id="twice")} == {
        first.run_id,
        second.run_id,
    }


async def test_an_id_the_caller_chose_is_still_refused_when_taken(
    make_scheduler: SchedulerFactory,
) -> None:
    from leoflow.store.errors import RunExists

    spec = dag('dag_id: named\ntasks:\n  a: {command: "true"}\n')
    scheduler = await make_scheduler(spec)
    await scheduler.trigger("named", run_id="mine")
    with pytest.raises(RunExists):
        await scheduler.trigger("named", run_id="mine")
