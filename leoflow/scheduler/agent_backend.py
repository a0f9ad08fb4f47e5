"""What the agent endpoint needs from the scheduler: the ``AgentBackend`` contract and
the small records it trades in. The endpoint authenticates and authorizes; the
backend keeps the state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol


@dataclass(frozen=True)
class TaskSession:
    ti_pk: int
    try_number: int
    dag_id: str
    run_id: str
    task_id: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class TicketUse:
    status: Literal["ok", "unknown", "replayed", "expired"]
    ti_pk: int | None
    try_number: int | None


@dataclass(frozen=True)
class StartSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout_seconds: float | None
    # Each direct upstream's output (``leoflow.domain.outputs``), and the output limit.
    inputs: dict[str, str] = field(default_factory=dict)
    output_limit: int = 0


@dataclass(frozen=True)
class Outcome:
    """How a try ended, as its agent reports it."""

    exit_code: int
    oom_killed: bool = False
    timed_out: bool = False
    message: str = ""
    # The agent failed before the command ran; ``message`` says why.
    not_started: bool = False
    # What the command wrote to $LEOFLOW_OUTPUT, or why the agent could not take it.
    output: str | None = None
    output_error: str = ""


class SessionRefused(Exception):
    """A backend may raise this from any call when the task instance stopped accepting
    the session after ``session()`` answered (it turned terminal, another try began).
    The agent gets PERMISSION_DENIED."""


class AgentBackend(Protocol):
    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse: ...

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        """None: no such task instance, the try is not the current one, or it is terminal."""
        ...

    async def start(self, s: TaskSession, *, executor_ref: str) -> StartSpec:
        """Marks the task instance running. Called again with the same ``executor_ref``
        for a try already running (a Start resent after a broken connection), it
        answers the same spec."""
        ...

    async def heartbeat(self, s: TaskSession) -> bool:
        """True: cancellation requested."""
        ...

    async def append_log(self, s: TaskSession, data: bytes) -> None: ...

    async def log_size(self, s: TaskSession) -> int:
        """Bytes of this try's log stored so far (where a resent chunk may overlap)."""
        ...

    async def complete(self, s: TaskSession, outcome: Outcome) -> None: ...

    async def resolve_secret(self, s: TaskSession, name: str) -> str | None:
        """Only called for declared names; None: it cannot be resolved."""
        ...
