"""``leoflow agent``: runs a task's command for the control plane, over gRPC.

Imports only ``leoflow.protocol``, grpc and the stdlib, never the domain, settings,
pydantic or yaml: in a pod it starts once per task, so its import time is paid per
task. See ``leoflow.agent.cli`` for modes, environment, the pool's stdin protocol and
exit codes.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the agent; returns the process exit code."""
    import os
    import sys

    # Commands are started with fork() (their parent-death signal is set between fork
    # and exec). With fork support on, grpc restarts its threads in the child, which
    # then write errors into the task's output. The child only execs: it needs none.
    os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "0"

    from leoflow.agent.cli import run

    return run(sys.argv[1:] if argv is None else argv)
