"""What the warm pool keeps: a try waiting for or running in a warm pod, a warm pod,
and counters for benchmarks and metrics (``leoflow.kube.warm``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from leoflow.domain.warm_pods import ReusePods
from leoflow.kube.objects import JsonObj
from leoflow.kube.tries import Key


@dataclass(eq=False)
class Work:
    key: Key
    dag_id: str
    ticket: str
    shape: str
    template: JsonObj
    reuse: ReusePods
    cancelled: str | None = None
    note: str | None = None


@dataclass(eq=False)
class WarmPod:
    name: str
    dag_id: str
    shape: str
    reuse: ReusePods
    created_at: float
    ticket_hash: str | None = None
    uid: str | None = None
    asked: bool = False  # has asked for work: it started
    retiring: bool = False
    tasks: int = 0  # tries handed to it
    running: Work | None = None
    finishing: bool = False  # its try reported its end: it asks for work next
    waiter: asyncio.Future[Work | None] | None = None
    pending: bool = True


@dataclass
class WarmStats:
    created: int = 0
    handed: int = 0
    retired: dict[str, int] = field(default_factory=dict)
    # When each of the latest tries was handed to a pod (benchmarks/bench_warm.py).
    handed_at: dict[Key, float] = field(default_factory=dict)
