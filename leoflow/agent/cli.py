"""``leoflow agent [--pool] [--events] [--endpoint ADDRESS] [--ca-file PATH]``

Single mode (a task pod; the default) runs the one task whose ticket is in
``LEOFLOW_AGENT_TICKET`` and exits with its command's exit code.

Pool mode (``--pool``; Lite's warm agent) runs many tasks at once, each with its
own ticket, session, child process, log stream, heartbeats and OOM sampling. It
reads JSON lines on stdin:

    {"op": "run", "key": "<ti_pk>:<try>", "ticket": "<ticket>"}
    {"op": "cancel", "key": "<ti_pk>:<try>", "reason": "<optional text>"}
    {"op": "dial"}

``dial`` (no key) opens the connection to the endpoint now, ahead of the first task:
Lite sends it once its endpoint serves, so that task does not wait for the connect.
A ``run`` with a key already running, and any line that is not one of these, is
refused with a message on stderr (and an ``error`` event). ``cancel`` stops the
command as a cancellation from the control plane would: SIGTERM to its process
group, SIGKILL after ``LEOFLOW_AGENT_KILL_GRACE``; the task still reports Complete.
When stdin closes the agent accepts no more work, waits for its running tasks to
finish (send ``cancel`` first to stop them sooner) and exits 0. SIGTERM or SIGINT
is forwarded to every running command's process group; the agent then exits
128+signal once they are done.

Stdout: nothing, unless ``--events``, which writes one JSON object a line:
``{"event": "started", "key", "pid"}``, ``{"event": "finished", "key", "exit_code",
"message"}`` (after Complete was sent, or when the task could not start) and
``{"event": "error", "key", "message"}``. Diagnostics go to stderr.

Environment: ``LEOFLOW_AGENT_ENDPOINT`` (gRPC target: host:port or unix:/path),
``LEOFLOW_AGENT_CA_FILE`` (or ``--ca-file``: a PEM CA bundle; when set the channel is
TLS and the endpoint's certificate must chain to it; unset, plaintext, as Lite on
loopback), ``LEOFLOW_AGENT_TICKET`` (single mode; removed from the command's environment),
``LEOFLOW_POD_NAME``/``LEOFLOW_POD_UID`` (downward API), ``LEOFLOW_AGENT_CONNECT_TIMEOUT``
(seconds to keep retrying an unreachable endpoint, default 60),
``LEOFLOW_AGENT_KILL_GRACE`` (seconds between SIGTERM and SIGKILL on timeout or
cancellation, default 10), ``LEOFLOW_CGROUP_ROOT`` (default /sys/fs/cgroup),
``LEOFLOW_AGENT_TASK_USER`` (a user name or uid: run every command as that user, with
its groups and HOME; needs an agent running as root), ``LEOFLOW_AGENT_TASK_UIDS``
(``START-END``: each command its own uid from the range, ``leoflow.agent.task_uids``;
root too), ``LEOFLOW_SCRATCH_DIR`` (where
tries' input and output files go, default ``TMPDIR``; Lite gives its pool agent a
private one and removes it when the agent ends).

A command's environment is built, never inherited (``leoflow.agent.environment``): in
pool mode the documented base (PATH, HOME, LANG, ...) taken from ours; in single mode
(a pod) the container's environment without any ``LEOFLOW_*`` variable. Then the
task's env and context variables, then its secrets. Secret values are masked as
``***`` in its log, message and output before they are sent (``leoflow.agent.masking``).
Each command gets SIGKILL when the agent dies (``leoflow.agent.lifeline``).

Exit codes besides the command's own: 2 usage, 3 control plane unreachable,
4 ticket or session refused, 5 task setup failed (a secret, the working directory, a
NUL byte, the task user), 126 command not executable, 127 command not found. Each
setup failure is reported at once in Complete with ``not_started`` set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from typing import Any

from leoflow.agent import held_dirs, pool
from leoflow.agent.cgroup import find_oom_counter
from leoflow.agent.channel import Channel
from leoflow.agent.child_watch import pidfd_reaping
from leoflow.agent.client import channel_credentials
from leoflow.agent.environment import (
    TaskUserError,
    base_environment,
    container_environment,
    resolve_task_user,
)
from leoflow.agent.scratch import SCRATCH
from leoflow.agent.startup_gc import settled
from leoflow.agent.task import EXIT_USAGE, Supervisor, TaskRun, warn
from leoflow.agent.task_uids import ENV as TASK_UIDS_ENV
from leoflow.agent.task_uids import TaskUids, UidRangeError, parse_uid_range

_USAGE = "usage: leoflow agent [--pool | --warm] [--events] [--endpoint ADDRESS] [--ca-file PATH]"
# For people; the module's docstring is the protocol's reference, for its maintainers.
HELP = f"""{_USAGE}

The task agent: runs one task's command for the control plane (in a task pod), or many
(--pool, Lite's warm agent). Lite and the Kubernetes executor start it; it is not a
command to run by hand.

options:
  --pool              run many tasks, each from a JSON line on stdin (Lite's warm agent)
  --warm              a warm task pod: run its DAG's tasks one after another
                      (LEOFLOW_AGENT_TICKET is the pod's ticket; leoflow.agent.warm)
  --events            write a JSON line to stdout as each task starts and finishes
  --endpoint ADDRESS  the control plane's gRPC endpoint, host:port or unix:/path
                      (default: $LEOFLOW_AGENT_ENDPOINT)
  --ca-file PATH      PEM CA bundle: the channel is TLS, the endpoint's certificate must
                      chain to it (default: $LEOFLOW_AGENT_CA_FILE; unset: plaintext)
  -h, --help          show this help and exit

environment:
  LEOFLOW_AGENT_TICKET           the task's single-use ticket (one task, as in a pod)
  LEOFLOW_AGENT_CONNECT_TIMEOUT  seconds to retry an unreachable endpoint (default 60)
  LEOFLOW_AGENT_KILL_GRACE       seconds from SIGTERM to SIGKILL on a stop (default 10)
  LEOFLOW_AGENT_TASK_USER        run every command as this user (the agent must be root)
  LEOFLOW_SCRATCH_DIR            where tries' input and output files go (default TMPDIR)

exit codes besides the command's own: 2 usage, 3 control plane unreachable, 4 ticket or
session refused, 5 task setup failed, 126 command not executable, 127 command not found"""


def run(argv: list[str]) -> int:
    pool = events = warm = False
    endpoint = os.environ.get("LEOFLOW_AGENT_ENDPOINT", "")
    ca_file = os.environ.get("LEOFLOW_AGENT_CA_FILE", "")
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--pool":
            pool = True
        elif arg == "--events":
            events = True
        elif arg == "--warm":
            warm = True
        elif arg == "--endpoint" and args:
            endpoint = args.pop(0)
        elif arg.startswith("--endpoint="):
            endpoint = arg.partition("=")[2]
        elif arg == "--ca-file" and args:
            ca_file = args.pop(0)
        elif arg.startswith("--ca-file="):
            ca_file = arg.partition("=")[2]
        elif arg in ("-h", "--help"):
            print(HELP)
            return 0
        else:
            print(f"{_USAGE}\nleoflow agent: unexpected argument {arg!r}", file=sys.stderr)
            return EXIT_USAGE
    if not endpoint:
        warn("no endpoint: set LEOFLOW_AGENT_ENDPOINT or pass --endpoint")
        return EXIT_USAGE
    if pool:  # the warm agent holds pipes for every task it runs at once
        from leoflow.agent.nofile import raise_open_files_limit

        raise_open_files_limit()
    try:
        connect_timeout = float(os.environ.get("LEOFLOW_AGENT_CONNECT_TIMEOUT", "60"))
        kill_grace = float(os.environ.get("LEOFLOW_AGENT_KILL_GRACE", "10"))
    except ValueError as exc:
        warn(f"bad number in LEOFLOW_AGENT_CONNECT_TIMEOUT or LEOFLOW_AGENT_KILL_GRACE: {exc}")
        return EXIT_USAGE
    credentials = None
    if ca_file:
        try:
            credentials = channel_credentials(ca_file)
        except ValueError as exc:
            warn(str(exc))
            return EXIT_USAGE
    ticket = os.environ.pop("LEOFLOW_AGENT_TICKET", "")
    if not pool and not ticket:
        warn("no ticket: LEOFLOW_AGENT_TICKET is not set")
        return EXIT_USAGE
    user = None
    if user_spec := os.environ.get("LEOFLOW_AGENT_TASK_USER", ""):
        try:
            user = resolve_task_user(user_spec)
        except TaskUserError as exc:
            warn(f"LEOFLOW_AGENT_TASK_USER: {exc}")
            return EXIT_USAGE
    uids = None
    if uid_spec := os.environ.get(TASK_UIDS_ENV, ""):
        try:
            uids = TaskUids(*parse_uid_range(uid_spec))
        except UidRangeError as exc:
            warn(f"{TASK_UIDS_ENV}: {exc}")
            return EXIT_USAGE
    base = base_environment(os.environ, user) if pool else container_environment(os.environ, user)
    settings = dict(
        base_env=base,
        task_user=user,
        task_uids=uids,
        endpoint=endpoint,
        credentials=credentials,
        connect_timeout=connect_timeout,
        kill_grace=kill_grace,
        cgroup_root=os.environ.get("LEOFLOW_CGROUP_ROOT", "/sys/fs/cgroup"),
        pod_name=os.environ.get("LEOFLOW_POD_NAME", ""),
        pod_uid=os.environ.get("LEOFLOW_POD_UID", ""),
    )
    settled()  # the agent's imports are done (see startup_gc)
    if pool:
        if scratch := os.environ.get("LEOFLOW_SCRATCH_DIR"):
            held_dirs.hold(scratch)  # held while we live, Lite or no Lite (see held_dirs)
        try:
            return asyncio.run(_reaping(_pool(settings, events)))
        finally:
            _close_scratch()
    if warm:
        return asyncio.run(_reaping(_warm(settings, ticket)))
    return asyncio.run(_reaping(_single(settings, ticket)))


def _close_scratch() -> None:
    """Remove what is left of the tries' directories, then the directory Lite gave us
    for them if that is now empty: Lite removes it once we have ended, unless Lite
    itself was killed (we end then too, on the parent-death signal)."""
    SCRATCH.close()
    if base := os.environ.get("LEOFLOW_SCRATCH_DIR"):
        with contextlib.suppress(OSError):
            os.rmdir(base)
        held_dirs.release(base)


async def _reaping(work: Coroutine[Any, Any, int]) -> int:
    with pidfd_reaping():
        return await work


def _channel(settings: dict[str, Any]) -> Channel:
    return Channel(
        settings["endpoint"],
        connect_timeout=settings["connect_timeout"],
        credentials=settings["credentials"],
    )


def _supervisor(settings: dict[str, Any], on_event: Any = None) -> Supervisor:
    sup = Supervisor(
        _channel(settings),
        oom=find_oom_counter(settings["cgroup_root"]),
        kill_grace=settings["kill_grace"],
        pod_name=settings["pod_name"],
        pod_uid=settings["pod_uid"],
        on_event=on_event,
        base_env=settings["base_env"],
        task_user=settings["task_user"],
        task_uids=settings["task_uids"],
    )
    sup.install_signal_handlers()
    return sup


async def _single(settings: dict[str, Any], ticket: str) -> int:
    sup = _supervisor(settings)
    try:
        return await TaskRun(sup, ticket).run()
    finally:
        await sup.heartbeats.close()
        await sup.channel.close()


async def _warm(settings: dict[str, Any], ticket: str) -> int:
    from leoflow.agent.warm import WarmAgent

    sup = _supervisor(settings)
    try:
        return await WarmAgent(sup, ticket, lambda: _channel(settings)).run()
    finally:
        await sup.heartbeats.close()
        await sup.channel.close()


async def _pool(settings: dict[str, Any], events: bool) -> int:
    # Made on the running loop: the supervisor installs its signal handlers there.
    return await pool.run_pool(_supervisor(settings, pool.emit if events else None))
