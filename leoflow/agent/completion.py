"""A try's end: the message that tells it, and the Complete that reports it.

The message names the cause the control plane cannot see for itself: the kernel's
OOM killer first, then the timeout, a cancel, and last the exit itself.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.outcome import (
    EXIT_NOT_FOUND,
    OOM_MESSAGE,
    exit_message,
    format_duration,
    shell_not_found,
    take_reason,
    warn,
)
from leoflow.protocol.agent_v1 import pb

if TYPE_CHECKING:
    from leoflow.agent.task import TaskRun


def killed_by_oom(
    before: int | None,
    after: int | None,
    exit_code: int,
    signum: int,
    *,
    overlapped: bool,
    sent_kill: bool,
) -> bool:
    """Whether the OOM kills counted over the try's life (``before``, ``after``) were its."""
    if before is None or after is None or after <= before:
        return False
    # Alone in the cgroup, any rise is ours. Sharing it, the rise is ours when we
    # died of a SIGKILL we did not send ourselves.
    died_of_kill = signum == signal.SIGKILL or exit_code == 128 + signal.SIGKILL
    return not overlapped or (died_of_kill and not sent_kill)


def end_message(run: TaskRun, exit_code: int, signum: int, time_limit: float, oom: bool) -> str:
    reason = take_reason(run.reason_path, run.secrets.text) if run.reason_path else ""
    if oom:
        return OOM_MESSAGE
    if run.timed_out:
        return f"timed out after {format_duration(time_limit)}"
    if run.cancel_reason is not None:
        return f"cancelled: {run.cancel_reason}"
    not_found = None
    if exit_code == EXIT_NOT_FOUND and not signum:
        not_found = shell_not_found(*run.command)
    return exit_message(exit_code, signum, reason, run.forwarded, not_found)


async def report(
    run: TaskRun,
    exit_code: int,
    message: str,
    *,
    oom_killed: bool = False,
    signum: int = 0,
    not_started: bool = False,
    output: str | None = None,
    output_error: str = "",
) -> None:
    """Send the try's Complete; a failure to is warned of, never raised."""
    # The last of what the command made (its exit reason, its output) leaves here.
    message, output, output_error = run.secrets.completion(message, output, output_error)
    request = pb.CompleteRequest(
        exit_code=exit_code,
        oom_killed=oom_killed,
        timed_out=run.timed_out,
        signal=signum,
        message=message,
        not_started=not_started,
        output=output,
        output_error=output_error,
    )
    try:
        await run.sup.channel.call("complete", request, run.token)
    except (Refused, Unreachable) as exc:
        # Signalled with the control plane (Lite stopping), a refusal is expected:
        # the control plane runs the try again and says so itself.
        if isinstance(exc, Refused) and exc.resent:
            warn(
                f"{run.label}: its completion was sent again after the connection "
                f"broke and refused ({exc.details}): the first copy may have been "
                "recorded, or the control plane decided the try's outcome itself"
            )
        elif not (isinstance(exc, Refused) and run.sup.received_signal is not None):
            warn(f"{run.label}: its completion (exit code {exit_code}) was not recorded: {exc}")
    run.sup.event(event="finished", key=run.key, exit_code=exit_code, message=message)
