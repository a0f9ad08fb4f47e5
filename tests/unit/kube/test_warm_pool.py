"""The warm pool's accounting, driven as the executor and the endpoint drive it: pods
never past max_pods nor past the tries waiting, a pod that never asked for work fails
one try (no endless pods for a shape that cannot start), a queued try cancels."""

from __future__ import annotations

import time
from typing import Any

from leoflow.domain.dag import TaskSpec
from leoflow.domain.execution import ExecutorEvent, Launch, LaunchWaiting, TaskFinished
from leoflow.domain.warm_pods import ReusePods
from leoflow.kube.records import PodRecord
from leoflow.kube.warm import WarmPool

SHAPE = "shape-1"


class Pods:
    def __init__(self) -> None:
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.events: list[ExecutorEvent] = []

    async def create(self, manifest: dict[str, Any], key: object) -> None:
        self.created.append(manifest["metadata"]["name"])

    def finished(self) -> list[TaskFinished]:
        return [e for e in self.events if isinstance(e, TaskFinished)]


def _pool() -> tuple[WarmPool, Pods]:
    pods = Pods()
    pool = WarmPool(
        create=pods.create,
        delete=lambda name, uid: pods.deleted.append(name),
        report=lambda: pods.events.append,
        clock=time.time,
        pending_timeout=600,
    )
    return pool, pods


def _submit(pool: WarmPool, ti_pk: int, reuse: ReusePods, dag_id: str = "d") -> None:
    launch = Launch(
        ti_pk, 1, dag_id, "r", "t", TaskSpec(task_id="t", command=["true"]), ticket=f"tk{ti_pk}"
    )
    template = {
        "metadata": {"name": "x", "labels": {}, "annotations": {}},
        "spec": {"containers": [{"name": "task", "image": "i", "env": []}]},
    }
    pool.submit(launch, template, SHAPE, reuse)


async def test_pods_follow_demand_up_to_max_pods() -> None:
    pool, pods = _pool()
    reuse = ReusePods(max_pods=3)
    for ti_pk in (1, 2):
        _submit(pool, ti_pk, reuse)
    await pool.drain_creates()
    assert len(pods.created) == 2  # two tries wait: two pods, not max_pods
    for ti_pk in range(3, 11):
        _submit(pool, ti_pk, reuse)
    await pool.drain_creates()
    assert len(pods.created) == 3
    notes = {e.ti_pk: e.reason for e in pods.events if isinstance(e, LaunchWaiting)}
    assert notes[1] == "warm_pod_starting" and notes[10] == "warm_pod_starting"
    # Another DAG's pods are counted against its own max_pods, not this one's.
    _submit(pool, 11, reuse, dag_id="other")
    await pool.drain_creates()
    assert len(pods.created) == 4


async def test_a_pod_that_ends_before_asking_fails_one_try_and_is_replaced() -> None:
    pool, pods = _pool()
    reuse = ReusePods(max_pods=1)
    for ti_pk in (1, 2):
        _submit(pool, ti_pk, reuse)
    await pool.drain_creates()
    (name,) = pods.created
    ended = PodRecord(name, "uid-1", None, None, "Failed", exit_code=3, shape=SHAPE)
    pool.on_pod(ended, name)
    await pool.drain_creates()
    (failed,) = pods.finished()
    assert (failed.ti_pk, failed.exit_code, failed.reason) == (1, 3, "exit_code")
    assert len(pods.created) == 2  # try 2 still waits: a pod for it


async def test_a_queued_try_cancels_without_a_pod() -> None:
    pool, pods = _pool()
    _submit(pool, 1, ReusePods(max_pods=1))
    assert pool.cancel((1, 1), "run cancelled")
    (done,) = pods.finished()
    assert (done.ti_pk, done.reason) == (1, "cancelled")
    assert len(pool) == 0
    assert not pool.cancel((1, 1), "again")


async def test_a_paused_dags_pod_takes_waiting_work_then_retires_at_once() -> None:
    pool, pods = _pool()
    reuse = ReusePods(max_pods=1, idle_timeout=600)
    _submit(pool, 1, reuse)
    await pool.drain_creates()
    (name,) = pods.created
    paused = "its DAG is paused"
    # Its run goes on: the try already waiting still gets the pod.
    first = await pool.next_task(name, "d", SHAPE, done=0, wait=600, drained=paused)
    assert first.ticket == "tk1" and not first.retire
    # Nothing else waits: the pod leaves now, not after idle_timeout (600 s).
    after = await pool.next_task(name, "d", SHAPE, done=1, wait=600, drained=paused)
    assert after.retire and after.reason == paused and not after.ticket
