"""``leoflow run``'s and ``leoflow lite``'s agent, started before the DAG loads and the
store opens, on a Unix socket in a directory only this user may enter: no other local
user can connect to the endpoint, let alone flood it.

The pool agent needs the endpoint's address only when it is sent its first task,
so with an address chosen up front (a Unix socket in a private directory) its
start-up (an interpreter, grpc) runs on the other core while this process imports
SQLAlchemy and the scheduler and opens the store. Only when the endpoint is Lite's
default (plaintext on loopback, an ephemeral port); any other configuration takes
the usual path, where the endpoint starts first.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from leoflow.agent import held_dirs
from leoflow.settings import Settings

if TYPE_CHECKING:
    from leoflow.domain.execution import Executor

# A Unix socket's path must fit sockaddr_un.sun_path (108 bytes on Linux, with its NUL).
_SUN_PATH_MAX = 107


def _default_endpoint(settings: Settings) -> bool:
    return (
        settings.agent_endpoint is None
        and settings.agent_listen == "127.0.0.1:0"
        and settings.agent_tls_cert_file is None
    )


@contextlib.asynccontextmanager
async def early_agent(
    settings: Settings, executor_name: str
) -> AsyncIterator[tuple[Settings, Executor | None]]:
    """Yield the settings to run with and the already started agent executor (or None)."""
    if executor_name != "agent" or not _default_endpoint(settings):
        yield settings, None
        return
    from leoflow.executor.local_agent import LocalAgentExecutor

    socket_dir = held_dirs.make("leoflow-run-")
    address = f"unix:{socket_dir}/agent.sock"
    if len(address) - len("unix:") > _SUN_PATH_MAX:  # a long TMPDIR: the usual path
        held_dirs.remove(socket_dir)
        yield settings, None
        return
    try:
        settings = settings.model_copy(update={"agent_listen": address, "agent_endpoint": address})
        agent = LocalAgentExecutor(settings, agent_endpoint=address, endpoint_dir=socket_dir)
        try:
            await agent.warm()
            yield settings, agent
        finally:
            await agent.stop()  # already stopped if the runtime closed it; idempotent
    finally:
        held_dirs.remove(socket_dir)
