"""When slots are the limit, a completion hands its slot on at once: the tick that
applies it admits the next task, and that tick is one store round trip, however many
of its tries end with output to store. Read from the stage trace (``aio.stages``):
the loop's ticks, the tries' stages and every store transaction, as they happened."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from leoflow.aio import stages
from leoflow.domain.states import RunState
from leoflow.store import Store
from tests.integration.scheduler.conftest import SchedulerFactory, dag


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[None]:
    stages.configure(str(tmp_path / "stages.jsonl"))
    try:
        yield
    finally:
        stages.configure(None)


def _ticks(marks: list[tuple[float, str, int, int]]) -> list[dict[str, int]]:
    """Per tick: how many tries it finished and admitted, and the store transactions
    between its start and its commit."""
    ticks: list[dict[str, int]] = []
    current: dict[str, int] | None = None
    for _, stage, _, _ in marks:
        if stage == "tick":
            current = {"applied": 0, "admitted": 0, "transaction": 0}
            ticks.append(current)
        elif stage == "flushed":
            current = None
        elif current is not None and stage in current:
            current[stage] += 1
    return ticks


async def test_a_completion_admits_the_next_task_in_its_own_tick_in_one_round_trip(
    make_scheduler: SchedulerFactory, store: Store, traced: None
) -> None:
    n = 12
    tasks = "\n".join(
        f"  t{i:02d}: {{command: 'echo out-{i}; echo err-{i} >&2'}}" for i in range(n)
    )
    spec = dag(f"dag_id: handoff\nmax_active_tasks: 2\ntasks:\n{tasks}\n")
    # No periodic flush: a tick's round trips are the tick's own.
    scheduler = await make_scheduler(spec, log_flush_interval=3600.0)
    await scheduler.start()
    row = await scheduler.trigger("handoff")
    assert (await scheduler.wait_run(row.pk)).state is RunState.SUCCESS

    ticks = _ticks(stages.marks())
    admitting = [t for t in ticks if t["admitted"]]
    assert sum(t["admitted"] for t in admitting) == n
    assert admitting[0]["admitted"] == 2  # the slots fill at once
    # Every later admission came in a tick that freed a slot: no turn of the loop,
    # poll or timer between a completion and its successor's admission.
    assert all(t["applied"] for t in admitting[1:]), admitting
    handoffs = [t for t in admitting[1:] if t["applied"]]
    assert handoffs
    # One transaction each: the ends, the finished tries' output and the launches.
    assert [t["transaction"] for t in handoffs] == [1] * len(handoffs), handoffs
    # ...and the output is there, whole, with each end.
    for ti in await store.list_task_instances(run_pk=row.pk):
        i = int(ti.task_id[1:])
        log = await store.read_log(ti.pk, ti.try_number)
        assert sorted(log.decode().split()) == sorted([f"out-{i}", f"err-{i}"]), ti.task_id


async def test_agents_appends_and_size_reads_that_arrive_together_share_a_transaction(
    store: Store, tmp_path: Path, traced: None
) -> None:
    from leoflow.scheduler.agent_backend import TaskSession
    from leoflow.scheduler.agent_service import SchedulerBackend
    from leoflow.secrets import DirectorySecrets
    from tests.integration.store.helpers import make_run

    run = await make_run(store, tasks=4)
    tis = await store.list_task_instances(run_pk=run.pk)
    sessions = [TaskSession(ti.pk, 1, "dag", "run", ti.task_id, ()) for ti in tis]
    # A replica that does not lead (no scheduler): every call is the store's.
    backend = SchedulerBackend(lambda: None, store, DirectorySecrets(tmp_path / "secrets"))
    await backend.append_log(sessions[0], b"first ")
    before = len([m for m in stages.marks() if m[1] == "transaction"])
    # Thirty-two chunks at once, eight for each of four tries: one transaction.
    await asyncio.gather(
        *(backend.append_log(s, f"{s.task_id} ".encode()) for s in sessions * 8),
    )
    sizes = await asyncio.gather(*(backend.log_size(s) for s in sessions))
    after = [m for m in stages.marks() if m[1] == "transaction"][before:]
    assert len(after) == 2  # the appends', then the size reads'
    first = sessions[0]
    assert await store.read_log(first.ti_pk, 1) == b"first " + f"{first.task_id} ".encode() * 8
    assert sizes == [len(await store.read_log(s.ti_pk, 1)) for s in sessions]
