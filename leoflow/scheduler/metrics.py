"""The scheduler's Prometheus metrics (no-ops in ``leoflow run``: see ``instruments``)."""

from __future__ import annotations

from leoflow.domain.admission import Admission
from leoflow.scheduler.instruments import counter, gauge, histogram

RUNNING = gauge("leoflow_running_tasks", "Task instances running now")
TASKS_FINISHED = counter(
    "leoflow_task_tries_finished_total", "Finished tries by the state they led to", ["state"]
)
QUEUE_DEPTH = gauge(
    "leoflow_admission_queue_depth",
    "Ready task instances waiting, by the limit that holds them",
    ["reason"],
)
ADMITTED = counter("leoflow_admission_admitted_total", "Task instances admitted")
DISPATCH_LATENCY = histogram(
    "leoflow_dispatch_latency_seconds",
    "From ready (upstreams done) to admitted and handed to the executor",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LEADER = gauge("leoflow_scheduler_leader", "1 while this scheduler leads")
EPOCH = gauge("leoflow_scheduler_epoch", "The fencing epoch this scheduler holds")
LEADER_TRANSITIONS = counter(
    "leoflow_scheduler_leader_transitions_total", "Times leadership changed here", ["to"]
)
STALE_WRITES = counter(
    "leoflow_scheduler_stale_epoch_writes_total", "Writes refused because a newer leader exists"
)

_REASONS = ("parallelism", "dag_max_active_tasks", "pool_slots", "pool_missing", "pool_too_small")


def observe_admission(admission: Admission) -> None:
    depths = admission.depth_by_reason()
    for reason in _REASONS:
        QUEUE_DEPTH.labels(reason=reason).set(depths.get(reason, 0))  # type: ignore[call-overload]
