"""A try's secrets: their values asked of the control plane, one ``ResolveSecret`` each,
and named for the command's environment (``LEOFLOW_SECRET_<NAME>``)."""

from __future__ import annotations

from collections.abc import Iterable

from leoflow.agent.channel import Channel
from leoflow.agent.client import Refused, Unreachable
from leoflow.agent.outcome import secret_env_name
from leoflow.protocol.agent_v1 import pb


async def resolve_secrets(
    channel: Channel, token: str, names: Iterable[str]
) -> tuple[dict[str, str], str]:
    """(environment variable -> value, ""), or ({}, why one could not be resolved)."""
    secrets: dict[str, str] = {}
    for name in names:
        try:
            resolved = await channel.call(
                "resolve_secret", pb.ResolveSecretRequest(name=name), token
            )
        except (Refused, Unreachable) as exc:
            why = exc.details if isinstance(exc, Refused) else str(exc)
            return {}, f"secret {name!r} could not be resolved: {why}"
        secrets[secret_env_name(name)] = resolved.value
    return secrets, ""
