"""Whether the ``docker`` executor's container engine answers, asked before anything
else starts, so ``leoflow run``/``leoflow lite`` stop at once with the socket named."""

from __future__ import annotations

from leoflow.settings import Settings


async def engine_problem(settings: Settings) -> str | None:
    """Why the engine cannot be used (the socket and how to start one), or None."""
    from leoflow.executor.docker.client import DockerClient, EngineUnreachable, socket_path
    from leoflow.executor.docker.executor import check_engine

    try:
        client = DockerClient(socket_path(settings.docker_host))
    except ValueError as exc:
        return str(exc)
    try:
        await check_engine(client)
    except EngineUnreachable as exc:
        return str(exc)
    finally:
        await client.close()
    return None
