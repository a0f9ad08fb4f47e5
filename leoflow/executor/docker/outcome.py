"""What a finished container says about its try, when its agent did not say it first.

The agent inside reports the task's own outcome (OOM from the container's cgroup
counter, see ``leoflow.agent.cgroup``); this is the backstop for an agent that
could not: killed with its container, unable to reach Lite, or never started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leoflow.agent.outcome import OOM_MESSAGE
from leoflow.domain.reasons import EndReason

# `leoflow agent` exit codes that mean it could not reach or use the control plane.
AGENT_COULD_NOT_REPORT = frozenset({3, 4, 5})
AGENT_EXIT_CODES = {
    3: "the agent could not reach Lite's agent endpoint",
    4: "Lite refused the agent's ticket or session",
    5: "the agent could not set the task up (a secret or the working directory)",
    125: "the engine could not run the container",
    126: "the container's command is not executable",
    127: "the container's command was not found in the image",
    137: "killed (SIGKILL)",
    143: "terminated (SIGTERM)",
}
_NOTE = "; its agent did not report, so this comes from the container's state"


@dataclass(frozen=True, slots=True)
class Outcome:
    reason: str
    exit_code: int | None
    message: str


def container_outcome(name: str, info: dict[str, Any]) -> Outcome:
    """The outcome ``docker inspect``'s State tells of a container that has stopped."""
    state: dict[str, Any] = info.get("State") or {}
    code = state.get("ExitCode")
    code = code if isinstance(code, int) else None
    if state.get("OOMKilled"):
        return Outcome(EndReason.OOM, code, OOM_MESSAGE)
    if code == 0:
        return Outcome(EndReason.SUCCESS, 0, f"the task's container exited 0{_NOTE}")
    what = AGENT_EXIT_CODES.get(code or -1)
    detail = f" ({what})" if what else ""
    error = f": {state['Error']}" if state.get("Error") else ""
    return Outcome(
        EndReason.EXIT_CODE,
        code,
        f"the task's container {name} exited with code {code}{detail}{error}{_NOTE}",
    )
