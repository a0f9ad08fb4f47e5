"""A slot-limited `leoflow run` never holds more slots than its limits, at any instant,
read back from the store's own times: a try holds its slot from ``queued_at`` (its
admission) until ``ended_at``. The run is as a user runs it (the agent executor)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from leoflow.store import Store
from tests.e2e.conftest import Leoflow


def _fan_out(path: Path, n: int, max_active: int) -> Path:
    tasks = "\n".join(f'  t{i:03d}:\n    command: ["echo", "t{i}"]' for i in range(n))
    path.write_text(f"dag_id: {path.stem}\nmax_active_tasks: {max_active}\ntasks:\n{tasks}\n")
    return path


def _peak(spans: list[tuple[float, float]]) -> int:
    """The most spans [start, end) open at once; an end and a start at the same
    moment hand the slot over (the end counts first)."""
    edges = sorted([(end, -1) for _, end in spans] + [(start, 1) for start, _ in spans])
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak


async def _spans(home: Path, dag_id: str) -> list[tuple[float, float]]:
    store = await Store.open(f"sqlite:///{home / 'leoflow.db'}", migrate=False)
    try:
        tis = await store.list_task_instances(dag_id=dag_id)
    finally:
        await store.close()
    spans = [(t.queued_at, t.ended_at) for t in tis]
    return [(q, e) for q, e in spans if q is not None and e is not None]


@pytest.mark.parametrize(
    ("max_active", "parallelism", "limit"),
    [(3, None, 3), (40, "2", 2)],
    ids=["max_active_tasks", "parallelism"],
)
def test_a_slot_limited_fan_out_holds_at_most_its_limit_at_any_instant(
    leoflow: Leoflow,
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    max_active: int,
    parallelism: str | None,
    limit: int,
) -> None:
    if parallelism is not None:
        env["LEOFLOW_PARALLELISM"] = parallelism
    dag = _fan_out(tmp_path / "fan.yaml", 40, max_active)
    done = leoflow("run", str(dag), "--executor", "agent", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    spans = asyncio.run(_spans(home, "fan"))
    assert len(spans) == 40  # every try has both times
    # Never above the limit, and at it: the limit, not the work, set the pace.
    assert _peak(spans) == limit
