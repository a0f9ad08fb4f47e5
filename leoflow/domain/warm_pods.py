"""Warm task pods (ADR 0053's N:1 topology on Kubernetes): what a DAG may ask for.

``kubernetes: {reuse_pods: {max_pods, idle_timeout, max_tasks_per_pod}}`` in a
``leoflow.yaml`` lets tasks of that DAG whose pods would be identical share a pod, one
task at a time. The platform may set a default for every DAG (setting
``reuse_pods_default``, chart value ``reusePods``); a DAG's own section wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from leoflow.domain.durations import parse_duration
from leoflow.domain.timebounds import INT32_MAX, MAX_DURATION_SECONDS

DEFAULT_MAX_TASKS_PER_POD = 200
DEFAULT_IDLE_TIMEOUT = 120.0


def _duration(value: object) -> float:
    return parse_duration(value, MAX_DURATION_SECONDS)


class ReusePods(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_pods: Annotated[int, Field(ge=1, le=INT32_MAX)] = 4
    idle_timeout: Annotated[
        float, BeforeValidator(_duration), PlainSerializer(lambda v: v, return_type=float)
    ] = DEFAULT_IDLE_TIMEOUT
    max_tasks_per_pod: Annotated[int, Field(ge=1, le=INT32_MAX)] = DEFAULT_MAX_TASKS_PER_POD


class KubernetesSection(BaseModel):
    """The DAG's ``kubernetes:`` section: Kubernetes-only behaviour of the whole DAG."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reuse_pods: ReusePods | None = None


def shape_of_task(task: Any) -> tuple[object, ...]:
    """What of a task decides its pod's shape besides the platform's settings: its
    image, resources and pod fields. Tasks with equal keys get identical pods (the
    executor hashes the built pod itself; this is for ``dags validate``'s note)."""
    return (
        task.image,
        task.resources.model_dump_json(),
        task.execution.model_dump_json(),
    )


def shares_no_shape(tasks: dict[str, Any]) -> bool:
    """True when the DAG has two or more tasks and no two of them share a pod shape."""
    keys = [shape_of_task(t) for t in tasks.values()]
    return len(keys) > 1 and len(set(keys)) == len(keys)


@dataclass(frozen=True, slots=True)
class PodTicketUse:
    """What a warm pod's ticket opened: the pod, its DAG and its shape."""

    pod: str
    dag_id: str
    shape: str
    idle_timeout: float
    max_tasks: int


@dataclass(frozen=True, slots=True)
class NextWork:
    """The answer to a warm pod asking for work: a task ticket, nothing, or retire."""

    ticket: str = ""
    retire: bool = False
    reason: str = ""


class WarmWork(Protocol):
    """What an executor with warm pods offers the agent endpoint (on the leader)."""

    def use_pod_ticket(self, ticket_hash: str) -> PodTicketUse | None:
        """The pod a warm pod's ticket was issued for, once; None if unknown or used."""
        ...

    def try_ending(self, key: tuple[int, int]) -> None:
        """The try's agent reported its end: its warm pod, if any, will ask for work."""
        ...

    async def next_task(
        self, pod: str, dag_id: str, shape: str, *, done: int, wait: float, drained: str
    ) -> NextWork:
        """The next task for the pod, waiting up to ``wait``; ``drained``: the DAG is
        paused or gone (why, in a few words): the pod retires as soon as none of its
        DAG's tries waits for it (runs already going go on, as with a pod per try)."""
        ...
