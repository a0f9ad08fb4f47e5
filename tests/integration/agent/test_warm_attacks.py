"""A warm pod's credential over a real Channel stream: its ticket works once, its pod
token gets work of its own DAG and shape only, and it is no task's session token.

The endpoint is real (real socket, real gRPC) over the fake backend, whose warm pods
are a real ``WarmPool``; the pods it creates are kept as manifests (their tickets are
read from them, as the kubelet would hand them to the pod's agent)."""

from __future__ import annotations

import time
from typing import Any

import grpc

from leoflow.domain.dag import TaskSpec
from leoflow.domain.execution import ExecutorEvent, Launch
from leoflow.domain.pod_credentials import new_pod_claims, sign_pod_session
from leoflow.domain.warm_pods import ReusePods
from leoflow.kube.warm import WarmPool
from leoflow.protocol.agent_v1 import pb

from .plane import KEY, Plane
from .test_channel_attacks import OTHER_KEY, UNAUTHENTICATED, Stream

SHAPE = "same-image-shape"


class Pods:
    """The warm pool's create and delete: manifests kept by name."""

    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.events: list[ExecutorEvent] = []

    async def create(self, manifest: dict[str, Any], key: object) -> None:
        self.created[manifest["metadata"]["name"]] = manifest

    def ticket_of(self, dag_label: str) -> tuple[str, str]:
        for name, manifest in self.created.items():
            if manifest["metadata"]["labels"]["leoflow.io/dag"] == dag_label:
                env = manifest["spec"]["containers"][0]["env"]
                return name, next(e["value"] for e in env if e["name"] == "LEOFLOW_AGENT_TICKET")
        raise AssertionError(f"no pod of {dag_label}: {sorted(self.created)}")


def _launch(ti_pk: int, dag_id: str) -> Launch:
    return Launch(
        ti_pk, 1, dag_id, "run1", "t", TaskSpec(task_id="t", command=["true"]), ticket=f"tk-{ti_pk}"
    )


def _template(dag_id: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "labels": {"leoflow.io/dag": dag_id}, "annotations": {}},
        "spec": {"containers": [{"name": "task", "image": "same:1", "env": []}]},
    }


async def _pool(plane: Plane) -> tuple[WarmPool, Pods]:
    pods = Pods()
    pool = WarmPool(
        create=pods.create,
        delete=lambda name, uid: pods.deleted.append(name),
        report=lambda: pods.events.append,
        clock=time.time,
        pending_timeout=600,
    )
    plane.backend.warm_work = lambda: pool  # type: ignore[attr-defined]
    reuse = ReusePods(max_pods=1, idle_timeout=0.2)
    pool.submit(_launch(1, "dag_a"), _template("dag_a"), SHAPE, reuse)
    pool.submit(_launch(2, "dag_b"), _template("dag_b"), SHAPE, reuse)
    await pool.drain_creates()
    return pool, pods


async def test_a_pod_token_gets_its_own_dags_task_only(plane: Plane) -> None:
    pool, pods = await _pool(plane)
    assert len(pods.created) == 2  # one per DAG, though the shapes are equal
    _, ticket_a = pods.ticket_of("dag_a")
    stream = Stream(plane, "pod-a")
    (got,) = await stream.send(("pod_exchange", pb.PodExchangeRequest(ticket=ticket_a), ""))
    assert got.code == 0, got.details
    assert got.pod_exchange.dag_id == "dag_a"
    token = got.pod_exchange.pod_token
    (work,) = await stream.send(("next_task", pb.NextTaskRequest(done=0, wait_seconds=1), token))
    assert work.code == 0 and work.next_task.ticket == "tk-1", work
    # DAG b's try waits, of the very same shape: pod a's next ask does not get it.
    (idle,) = await stream.send(
        ("next_task", pb.NextTaskRequest(done=1, wait_seconds=0.2), work.next_task.pod_token)
    )
    assert idle.next_task.ticket == "" and idle.next_task.retire, idle
    assert (2, 1) in pool.works
    await stream.close()


async def test_a_pod_ticket_works_once_and_a_pod_token_is_no_session(plane: Plane) -> None:
    _, pods = await _pool(plane)
    pod_a, ticket_a = pods.ticket_of("dag_a")
    stream = Stream(plane, "pod-a")
    (got,) = await stream.send(("pod_exchange", pb.PodExchangeRequest(ticket=ticket_a), ""))
    token = got.pod_exchange.pod_token
    now = time.time()
    forged_dag = sign_pod_session(new_pod_claims(pod_a, "dag_b", SHAPE, now=now, ttl=60), KEY)
    other_key = sign_pod_session(new_pod_claims(pod_a, "dag_a", SHAPE, now=now, ttl=60), OTHER_KEY)
    replies = await stream.send(
        ("pod_exchange", pb.PodExchangeRequest(ticket=ticket_a), ""),  # a second time
        ("start", pb.StartRequest(pod_name=pod_a), token),
        ("resolve_secret", pb.ResolveSecretRequest(name="warehouse"), token),
        ("log", pb.LogChunk(stream=pb.LogChunk.STDOUT, data=b"x"), token),
        ("heartbeat", pb.HeartbeatRequest(), token),
        ("next_task", pb.NextTaskRequest(wait_seconds=0.1), other_key),
        ("next_task", pb.NextTaskRequest(wait_seconds=0.1), plane.token(1)),
    )
    assert [r.code for r in replies] == [UNAUTHENTICATED] * 7, [r.details for r in replies]
    # A pod token naming another DAG (only a key holder could sign one) gets nothing.
    (forged,) = await stream.send(("next_task", pb.NextTaskRequest(wait_seconds=0.1), forged_dag))
    assert forged.code == 0 and forged.next_task.retire and not forged.next_task.ticket
    await stream.close()


async def test_a_replica_that_is_not_the_leader_sends_the_pod_elsewhere(plane: Plane) -> None:
    stream = Stream(plane, "pod")
    token = sign_pod_session(new_pod_claims("p", "dag_a", SHAPE, now=time.time(), ttl=60), KEY)
    (reply,) = await stream.send(("next_task", pb.NextTaskRequest(wait_seconds=0.1), token))
    assert reply.code == grpc.StatusCode.FAILED_PRECONDITION.value[0], reply
    await stream.close()
