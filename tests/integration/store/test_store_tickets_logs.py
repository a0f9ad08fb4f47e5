from __future__ import annotations

import asyncio
import itertools
import os

import pytest

from leoflow.store import Store, TicketUse

from .helpers import issue_ticket, make_run


async def test_ticket_is_single_use(store: Store) -> None:
    await issue_ticket(store, "h-ok", 7, 2, 1000.0)
    await issue_ticket(store, "h-old", 8, 1, 1000.0)
    assert await store.consume_ticket("h-ok", 500.0) == TicketUse("ok", 7, 2)
    assert await store.consume_ticket("h-ok", 501.0) == TicketUse("replayed", 7, 2)
    # Replayed stays replayed after expiry: the alarm must not be masked.
    assert await store.consume_ticket("h-ok", 5000.0) == TicketUse("replayed", 7, 2)
    assert await store.consume_ticket("h-old", 1000.0) == TicketUse("expired", 8, 1)
    assert await store.consume_ticket("h-old", 999.0) == TicketUse("ok", 8, 1)
    assert await store.consume_ticket("nope", 1.0) == TicketUse("unknown", None, None)


async def test_ticket_concurrent_use_only_one_ok(store_url: str, store: Store) -> None:
    rival = await Store.open(store_url)
    try:
        for i in range(10):
            await issue_ticket(store, f"h{i}", i, 1, 100.0)
            uses = await asyncio.gather(
                store.consume_ticket(f"h{i}", 1.0), rival.consume_ticket(f"h{i}", 1.0)
            )
            assert sorted(u.status for u in uses) == ["ok", "replayed"]
    finally:
        await rival.close()


async def test_log_round_trip_10mb_with_ranges(store: Store) -> None:
    blob = os.urandom(10 * 1024 * 1024 + 123)
    # Uneven appends, some spanning several chunks, some tiny.
    cuts = [0, 1, 7, 300_000, 300_001, 4_000_000, 9_999_999, len(blob)]
    for start, end in itertools.pairwise(cuts):
        await store.append_log(5, 1, blob[start:end])
    await store.append_log(5, 1, b"")
    await store.append_log(5, 2, b"other try")

    assert await store.log_size(5, 1) == len(blob)
    assert await store.read_log(5, 1) == blob
    for offset, limit in [
        (0, 1), (0, 10), (6, 2), (299_990, 20), (262_144, 262_144), (262_143, 2),
        (1_000_000, 3_000_000), (len(blob) - 5, 100), (len(blob), 10), (len(blob) + 5, 10),
        (123_456, None), (len(blob) - 1, None),
    ]:  # fmt: skip
        got = await store.read_log(5, 1, offset=offset, limit=limit)
        want = blob[offset:] if limit is None else blob[offset : offset + limit]
        assert got == want, (offset, limit)
    assert await store.read_log(5, 1, offset=10, limit=0) == b""
    assert await store.read_log(5, 2) == b"other try"
    assert await store.log_size(5, 2) == 9
    assert await store.read_log(6, 1) == b""
    assert await store.log_size(6, 1) == 0
    with pytest.raises(ValueError):
        await store.read_log(5, 1, offset=-1)


async def test_concurrent_log_appends_keep_every_byte(store_url: str, store: Store) -> None:
    rival = await Store.open(store_url)
    try:
        pieces = [bytes([i]) * (100 + i) for i in range(40)]
        await asyncio.gather(
            *((store if i % 2 else rival).append_log(9, 1, p) for i, p in enumerate(pieces))
        )
        data = await store.read_log(9, 1)
        assert len(data) == sum(len(p) for p in pieces) == await store.log_size(9, 1)
        assert sorted(data[i : i + 1] for i in range(len(data))) == sorted(
            bytes([b]) for p in pieces for b in p
        )
        # Each append stays contiguous.
        for p in pieces:
            assert p in data
    finally:
        await rival.close()


async def test_tickets_ride_along_with_a_batch_of_transitions(store: Store) -> None:
    from leoflow.domain.states import TaskState
    from leoflow.store import TaskChange

    run = await make_run(store, tasks=1)
    (ti,) = await store.list_task_instances(run_pk=run.pk)
    results = await store.transition_tasks(
        [TaskChange(ti.pk, TaskState.NONE, TaskState.SCHEDULED, 0, {"ready_at": 1.0})],
        epoch=None,
        tickets=[("ride-along", ti.pk, 1)],
        tickets_expire_at=2e9,
    )
    assert results == [True]
    use = await store.consume_ticket("ride-along", now=1e9)
    assert (use.status, use.ti_pk, use.try_number) == ("ok", ti.pk, 1)
    assert (await store.consume_ticket("ride-along", now=1e9)).status == "replayed"
