"""The narrow seam between the scheduler and whatever runs a task.

An executor launches and cancels; it never decides a task's state. What it
learns (started, finished) it hands back as events through the ``report``
callback, and the scheduler applies them. Executors whose tasks run under
``leoflow agent`` (Lite's agent, Kubernetes) need a ticket per launch and learn
outcomes from the agent endpoint instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the DAG models cost ~50 ms to import; Lite starts its agent first
    from leoflow.domain.dag import TaskSpec
    from leoflow.domain.warm_pods import ReusePods
from leoflow.domain.reasons import EndReason


@dataclass(frozen=True, slots=True)
class Launch:
    ti_pk: int
    try_number: int
    dag_id: str
    run_id: str
    task_id: str
    spec: TaskSpec
    ticket: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # Each direct upstream's output, for an executor without an agent (the agent
    # fetches its own with Start).
    inputs: dict[str, str] = field(default_factory=dict)
    # The DAG's warm-pod settings (``kubernetes.reuse_pods``); None: a pod per try.
    reuse_pods: ReusePods | None = None


def context_env(dag_id: str, run_id: str, task_id: str, try_number: int) -> dict[str, str]:
    """What every task's command sees of where it runs, whichever executor runs it."""
    return {
        "LEOFLOW_DAG_ID": dag_id,
        "LEOFLOW_RUN_ID": run_id,
        "LEOFLOW_TASK_ID": task_id,
        "LEOFLOW_TRY_NUMBER": str(try_number),
    }


@dataclass(frozen=True, slots=True)
class TaskStarted:
    ti_pk: int
    try_number: int
    executor_ref: str
    at: float


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """How a try ended. ``reason`` is a short code; ``message`` is for people.

    Reasons: the codes of ``leoflow.domain.reasons.EndReason``.
    """

    ti_pk: int
    try_number: int
    exit_code: int | None
    reason: str
    message: str
    at: float
    # What the try wrote to $LEOFLOW_OUTPUT (JSON text, checked), when it succeeded.
    output: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.reason == EndReason.SUCCESS


@dataclass(frozen=True, slots=True)
class LogData:
    ti_pk: int
    try_number: int
    data: bytes


@dataclass(frozen=True, slots=True)
class LaunchWaiting:
    """A queued try the executor is still trying to start: why it waits.

    Not an outcome: the try keeps its slot and its try number. ``message`` None
    clears an earlier note (the launch went through).
    """

    ti_pk: int
    try_number: int
    reason: str | None
    message: str | None
    at: float


ExecutorEvent = TaskStarted | TaskFinished | LogData | LaunchWaiting
Report = Callable[[ExecutorEvent], None]


@dataclass(frozen=True, slots=True)
class Attempt:
    """A try the store says is queued or running, offered to a restarted executor."""

    ti_pk: int
    try_number: int
    state: str
    dag_id: str
    run_id: str
    task_id: str
    executor_ref: str | None


class LaunchError(Exception):
    """The executor could not start the task; the message says why."""


@runtime_checkable
class KeepsDags(Protocol):
    """An executor that holds something per DAG outside Leoflow (the Kubernetes
    executor: each DAG's GC anchor) and drops it for DAGs that are gone."""

    def keep_dags(self, keep: Mapping[str, float | None]) -> None:
        """``keep``: every DAG that exists, with the time until which it is kept (None:
        for good); every other DAG is gone. Returns at once."""
        ...


class Executor(Protocol):
    name: str
    uses_agent: bool
    # Every agent of this executor dials this very process's endpoint (Lite's pool
    # agent), so the scheduler keeps its tickets in memory (``local_tickets``).
    agents_dial_here: bool

    async def warm(self) -> None:
        """Get ready for the first launch before the scheduler starts (Lite's agent
        executor starts its pool agent, so its start-up overlaps the caller's); the
        executors with nothing to prepare return at once."""
        ...

    async def start(self, report: Report) -> None: ...

    async def launch(self, launch: Launch) -> None: ...

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None: ...

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        """After a scheduler restart: the tries still alive under this executor.

        An executor whose tasks die with the scheduler (Lite) adopts none; the
        Kubernetes executor adopts those whose pods still exist.
        """
        ...

    async def stop(self) -> None: ...
