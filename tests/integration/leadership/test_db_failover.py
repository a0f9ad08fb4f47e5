"""Two `leoflow scheduler` processes without Kubernetes on one PostgreSQL: the
database lease makes exactly one lead, hands over on kill -9 (after expiry) and
SIGTERM (at once), and a leader cut off from the database stops before the other
takes office."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import URL, make_url

from leoflow.dagfile.loader import LoadedDag, parse_dag
from leoflow.domain.states import RunState, TaskState
from leoflow.runtime.dagfolder import record_dag
from leoflow.store import Store, TaskSeed
from tests.support.proxy import CuttableProxy

from .cluster import Scheduler, wait_holder

pytestmark = pytest.mark.slow  # PostgreSQL leadership failover

TIMINGS = {"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 0.5}

# `second` waits on a pool with no slots, so the test decides when it may start:
# after the first leader is gone, nothing is running when it is killed.
DAG = """
dag_id: dbfailover
tasks:
  first: {command: "echo first-$LEOFLOW_TRY_NUMBER >> {launches}"}
  second:
    command: "echo second-$LEOFLOW_TRY_NUMBER >> {launches}"
    depends_on: [first]
    pool: gate
"""


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[Store]:
    s = await Store.open(postgres_url)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    started: list[Scheduler] = []
    yield started
    for s in started:
        s.stop()


async def _seed_run(store: Store, tmp_path: Path, launches: Path) -> int:
    text = DAG.replace("{launches}", str(launches))
    spec = parse_dag(text, tmp_path / "dag.yaml")
    await record_dag(store, LoadedDag(spec, tmp_path / "dag.yaml", text))
    await store.upsert_pool("gate", 0)
    row = await store.create_run(
        "dbfailover",
        "manual__1",
        run_type="manual",
        logical_date=None,
        conf={},
        tasks=[
            TaskSeed(t.task_id, t.pool, t.pool_slots, t.priority, t.max_tries)
            for t in spec.tasks.values()
        ],
        epoch=None,
    )
    return row.pk


async def _task_state(store: Store, run_pk: int, task_id: str, state: TaskState) -> None:
    for _ in range(1800):
        tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run_pk)}
        if tis[task_id].state is state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{task_id} never reached {state}: {tis[task_id]}")


async def _run_done(store: Store, run_pk: int) -> RunState:
    for _ in range(1800):
        run = await store.get_run(run_pk)
        assert run is not None
        if run.state in (RunState.SUCCESS, RunState.FAILED):
            return run.state
        await asyncio.sleep(0.05)
    raise AssertionError("the run never finished")


async def test_kill_9_the_leader_mid_run_the_other_takes_over_after_expiry(
    store: Store, postgres_url: str, tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    launches = tmp_path / "launches"
    run_pk = await _seed_run(store, tmp_path, launches)
    a = Scheduler("sched-a", postgres_url, tmp_path, TIMINGS)
    schedulers.append(a)
    await wait_holder(store, "sched-a")
    b = Scheduler("sched-b", postgres_url, tmp_path, TIMINGS)
    schedulers.append(b)
    await _task_state(store, run_pk, "first", TaskState.SUCCESS)
    await _task_state(store, run_pk, "second", TaskState.SCHEDULED)  # waits on the gate
    # b is up and polling, and does not lead while a renews.
    await b.wait_for("agent endpoint listening")
    before = await store.get_lease()
    assert before.holder == "sched-a" and await store.current_epoch() == 1
    assert b.first_time("took office") is None

    a.signal(signal.SIGKILL)
    killed = time.monotonic()
    assert await a.wait() == -signal.SIGKILL
    after = await wait_holder(store, "sched-b")
    takeover = time.monotonic() - killed
    # b could not lead before a's last renewal aged a lease duration by b's clock.
    assert takeover >= TIMINGS["lease_duration"] - TIMINGS["retry_period"] - 0.2, takeover
    assert after.transitions == before.transitions + 1

    await store.upsert_pool("gate", 1)
    assert await _run_done(store, run_pk) is RunState.SUCCESS, b.tail()
    # Every task launched once: one line per launch, and the store agrees.
    assert sorted(launches.read_text().split()) == ["first-1", "second-1"]
    tis = {t.task_id: t for t in await store.list_task_instances(run_pk=run_pk)}
    assert {t: (ti.state, ti.try_number) for t, ti in tis.items()} == {
        "first": (TaskState.SUCCESS, 1),
        "second": (TaskState.SUCCESS, 1),
    }
    assert await store.current_epoch() == 2  # a, then b took office


async def test_sigterm_hands_over_at_once(
    store: Store, postgres_url: str, tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    # A lease far longer than the wait below: only a release lets b lead in time.
    slow = {"lease_duration": 120.0, "renew_deadline": 60.0, "retry_period": 0.5}
    a = Scheduler("sched-a", postgres_url, tmp_path, slow)
    schedulers.append(a)
    await wait_holder(store, "sched-a")
    b = Scheduler("sched-b", postgres_url, tmp_path, slow)
    schedulers.append(b)
    await b.wait_for("agent endpoint listening")
    a.signal(signal.SIGTERM)
    assert await a.wait() == 0, a.tail()
    await wait_holder(store, "sched-b", timeout=60)
    left = a.first_time("left office")
    took = await b.wait_for("took office")
    assert left is not None and took is not None and left <= took, (a.tail(), b.tail())
    assert a.first_time("released the database lease") is not None


class _PgProxy(CuttableProxy):
    """A cuttable TCP proxy in front of the server, which may listen on a Unix socket only."""

    def __init__(self, url: URL) -> None:
        super().__init__(url.host or "127.0.0.1", url.port or 5432)
        socket_dir = url.query.get("host")
        self._unix = (
            f"{socket_dir}/.s.PGSQL.{url.port or 5432}" if isinstance(socket_dir, str) else None
        )

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._unix is None:
            return await super()._handle(reader, writer)
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self._unix)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))


async def test_a_leader_cut_off_from_the_database_stops_before_the_other_leads(
    store: Store, postgres_url: str, tmp_path: Path, schedulers: list[Scheduler]
) -> None:
    url = make_url(postgres_url)
    proxy = _PgProxy(url)
    await proxy.start()
    try:
        via_proxy = (
            url.difference_update_query(["host"])
            .set(host="127.0.0.1", port=proxy.port)
            .render_as_string(hide_password=False)
        )
        a = Scheduler("sched-a", via_proxy, tmp_path, TIMINGS)
        schedulers.append(a)
        acquired = await wait_holder(store, "sched-a", log=a)
        b = Scheduler("sched-b", postgres_url, tmp_path, TIMINGS)
        schedulers.append(b)
        # a leads in its steady state: in office, and renewing through the proxy.
        for _ in range(1200):
            row = await store.get_lease()
            if a.first_time("took office") is not None and row.version >= acquired.version + 2:
                break
            await asyncio.sleep(0.05)
        assert row.holder == "sched-a" and row.version >= acquired.version + 2, a.tail()
        await proxy.cut()
        await wait_holder(store, "sched-b")
        took = await b.wait_for("took office")
        stepped_down = a.first_time("left office")
        assert stepped_down is not None, a.tail()
        assert took is not None, b.tail()
        assert stepped_down < took, (a.tail(), b.tail())
        assert a.process.poll() is None  # still running, a follower now
        assert await store.current_epoch() == 2
    finally:
        await proxy.stop()
