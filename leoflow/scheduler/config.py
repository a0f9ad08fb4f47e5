"""The scheduler's settings and the two ways its loop ends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SchedulerConfig:
    parallelism: int = 32
    pools: Mapping[str, int] = field(default_factory=dict)
    default_pool_slots: int = 128
    poll_interval: float = 1.0
    heartbeat_timeout: float = 60.0
    ticket_ttl: float = 600.0
    identity: str = "leoflow"
    # A solo scheduler (``leoflow run``) drives only the runs it creates: it takes
    # no office, recovers nothing and adopts nothing from the store, so it can run
    # beside a long-running scheduler on the same database.
    solo: bool = False
    # Catching up creates at most this many runs of one DAG that wait queued; more
    # come as those start, so a far start_date never floods the store in a burst.
    max_catchup_runs: int = 100
    retention: float | None = None  # seconds; see scheduler/retention.py
    removed_dag_grace: float = 600.0  # seconds; see StoreFollower.keep_anchors
    # How often running tasks' buffered output is written (a finished try's goes in
    # the commit that ends it, whenever that is; see scheduler/logbuffer.py).
    log_flush_interval: float = 0.2


# The run type of a solo scheduler's runs: no other scheduler adopts or recovers them.
LOCAL_RUN_TYPE = "local"


class LeadershipLost(Exception):
    """A fenced write was refused: another scheduler leads now."""


class SchedulerStopping(Exception):
    """The scheduler is stopping: it records nothing more. A try still running is
    left as it is in the store, and the next start retries it without spending a
    retry (see ``leoflow.scheduler.recovery``)."""
