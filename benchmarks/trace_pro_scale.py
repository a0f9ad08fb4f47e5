"""Where the chains' upstream → downstream lag goes: ``bench_pro_scale.py`` with probes.

    .venv/bin/python benchmarks/trace_pro_scale.py [bench_pro_scale options]

Runs one repeat of ``bench_pro_scale.py`` (its JSON on stdout as usual) with timing
probes wrapped around the scheduler's steps, and prints on stderr, for the ``chains``
DAG only, each stage of one edge's path (ms unless said; p50 / p90 / max):

- ``queue_wait``: a Complete's TaskFinished queued (``Scheduler.submit``) → the tick
  that applies it takes it (the tick in flight ends first, usually in its commit,
  then this tick's poll step if it has one);
- ``tick``: the whole tick; of it ``poll`` (the stepped store poll) and ``flush`` (the
  group commit), split into ``pg_connect_flush`` (waiting for a pooled connection) and
  ``pg_txn_flush`` (the transaction); ``pg_txn_other`` for every other transaction
  (ticket uses, agent writes);
- ``launch_start``: the launch task spawned after the commit → ``executor.launch`` runs;
- ``create_http``: ``KubeClient._send`` of the create (the bucket excluded) until the
  fake's answer;
- ``create_until_stored`` / ``create_stored_until_answer``: that HTTP split where the
  fake stored the pod (its ``created_at``, wall clock);
- ``pod_created_until_started`` / ``pod_started_until_ended``: the rest of a chain's
  step (the fake's kubelet and the simulated agent: Exchange, Start; Complete);
- ``loop_lag``: how late a 5 ms sleep wakes (the loop's own saturation).

A diagnostic: it patches private methods, so it follows them or breaks loudly.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_pro_scale as bench
from leoflow.domain.execution import TaskFinished
from leoflow.kube.client import KubeClient
from leoflow.kube.executor import KubernetesExecutor
from leoflow.scheduler.commit import GroupCommit
from leoflow.scheduler.core import Scheduler
from leoflow.scheduler.deadlines import DeadlineWatch
from leoflow.scheduler.poll_steps import SteppedPoll
from leoflow.store import engine

samples: dict[str, list[float]] = {}
queued: dict[tuple[int, int], float] = {}
spawned: dict[int, float] = {}
in_flush: contextvars.ContextVar[bool] = contextvars.ContextVar("in_flush", default=False)
frozen = [False]  # the chains' run is over: what follows is teardown


def note(key: str, seconds: float) -> None:
    if not frozen[0] or key.startswith(("create_", "pod_")):
        samples.setdefault(key, []).append(seconds)


def patch(owner: object, name: str, replacement: object) -> None:
    setattr(owner, name, replacement)


def timed(cls: type, name: str, key: str) -> None:
    original = getattr(cls, name)

    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            note(key, time.perf_counter() - started)

    setattr(cls, name, wrapper)


timed(SteppedPoll, "run", "poll")
timed(KubeClient, "_send", "create_http")
_flush = GroupCommit.flush


async def flush(self: GroupCommit, batch: Any) -> None:
    token = in_flush.set(True)  # this task's transactions only, not the agents'
    started = time.perf_counter()
    try:
        await _flush(self, batch)
    finally:
        in_flush.reset(token)
        note("flush", time.perf_counter() - started)


patch(GroupCommit, "flush", flush)


async def pg_run(
    self: engine.PostgresRunner,
    op: Any,
    *,
    write: bool,
    epoch: Any,
    fence: Any,
    urgent: bool = False,
) -> Any:
    which = "flush" if in_flush.get() else "other"

    async def once() -> Any:
        started = time.perf_counter()
        async with self.engine.connect() as conn:
            got = time.perf_counter()
            note(f"pg_connect_{which}", got - started)
            try:
                return await conn.run_sync(engine._transaction, op, write, epoch, fence, None)
            finally:
                note(f"pg_txn_{which}", time.perf_counter() - got)

    return await engine._retrying(once, self.retry_window, "PostgreSQL")


patch(engine.PostgresRunner, "run", pg_run)
_tick = Scheduler._tick


async def tick(self: Scheduler) -> None:
    started = time.perf_counter()
    try:
        await _tick(self)
    finally:
        note("tick", time.perf_counter() - started)


patch(Scheduler, "_tick", tick)
_check = DeadlineWatch.check


async def check(self: DeadlineWatch, now: float) -> None:
    """The tick takes its events right after this returns, with no await between."""
    await _check(self, now)
    taken = time.perf_counter()
    for pending in self._scheduler._events:
        event = pending.event
        if isinstance(event, TaskFinished):
            at = queued.pop((event.ti_pk, event.try_number), None)
            if at is not None:
                note("queue_wait", taken - at)


patch(DeadlineWatch, "check", check)
_submit = Scheduler.submit


async def submit(self: Scheduler, event: Any) -> None:
    if isinstance(event, TaskFinished):
        queued[(event.ti_pk, event.try_number)] = time.perf_counter()
    await _submit(self, event)


patch(Scheduler, "submit", submit)
_launch = Scheduler._launch


def launch(self: Scheduler, item: Any) -> Any:
    spawned[item.ti_pk] = time.perf_counter()
    return _launch(self, item)


patch(Scheduler, "_launch", launch)
_executor_launch = KubernetesExecutor.launch


async def executor_launch(self: KubernetesExecutor, item: Any) -> None:
    now = time.perf_counter()
    note("launch_start", now - spawned.pop(item.ti_pk, now))
    await _executor_launch(self, item)


patch(KubernetesExecutor, "launch", executor_launch)
_trigger = Scheduler.trigger


async def loop_lag() -> None:
    while True:
        started = time.perf_counter()
        await asyncio.sleep(0.005)
        note("loop_lag", time.perf_counter() - started - 0.005)


async def trigger(self: Scheduler, dag_id: str, **options: Any) -> Any:
    if dag_id == "pro_chains":  # from here on: the chains only
        samples.clear()
        answered.clear()
        bench_called.clear()
        queued.clear()
        self._background.spawn(loop_lag())
    row = await _trigger(self, dag_id, **options)
    if dag_id == "pro_chains":
        chains_run.append(row.pk)
    return row


patch(Scheduler, "trigger", trigger)
_create_pod = bench.TimedClient.create_pod
answered: dict[str, float] = {}  # pod name -> when its create's answer came (wall clock)
last_stats: dict[str, Any] = {}
bench_called: dict[str, float] = {}  # pod name -> when its create was called


async def create_pod(self: bench.TimedClient, body: Any) -> Any:
    try:
        return await _create_pod(self, body)
    finally:
        name = body["metadata"]["name"]
        answered[name] = time.time()
        bench_called[name] = self.called[name]


patch(bench.TimedClient, "create_pod", create_pod)
_ask = bench.Cluster.ask


async def ask(self: bench.Cluster, op: str) -> dict[str, Any]:
    answer = await _ask(self, op)
    if op == "stats":
        last_stats.clear()
        last_stats.update(answer)
    return answer


patch(bench.Cluster, "ask", ask)
_measure = bench.measure


chains_run: list[int] = []


async def measure(*args: Any) -> dict[str, Any]:
    try:
        result = await _measure(*args)
    finally:
        frozen[0] = True
    # The rest of each chain's step, on the fake's clock and the scheduler's: the
    # pod created → its agent's Start recorded → its Complete recorded.
    store = args[2]
    created = last_stats.get("created_at", {})
    for ti in await store.list_task_instances(run_pk=chains_run[-1]):
        pod = (ti.executor_ref or "").removeprefix("pod:").partition("@")[0]
        if pod in created and ti.started_at is not None and ti.ended_at is not None:
            note("pod_created_until_started", ti.started_at - created[pod])
            note("pod_started_until_ended", ti.ended_at - ti.started_at)
    return result


patch(bench, "measure", measure)


def pick(ordered: list[float], q: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def summary() -> dict[str, Any]:
    # The create's HTTP split at the moment the fake stored the pod: before it (the
    # request on its way and queued in the fake's loop) and after (the answer back).
    created = last_stats.get("created_at", {})
    for pod, at in answered.items():
        if pod in created and pod in bench_called:
            note("create_until_stored", created[pod] - bench_called[pod])
            note("create_stored_until_answer", at - created[pod])
    out: dict[str, Any] = {}
    for key, values in sorted(samples.items()):
        ordered = sorted(values)
        out[key] = {"n": len(values), "sum_s": round(sum(values), 3)}
        out[key] |= {q: pick(ordered, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("max", 1.0))}
    return out


atexit.register(lambda: print(json.dumps({"stages_ms": summary()}, indent=1), file=sys.stderr))

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "--repeat", "1", *sys.argv[1:]]
    bench.main()
