"""The agent protocol's generated messages under one short name, and its method paths.

The generated modules live in ``leoflow/protocol/leoflow/agent/v1/`` (regenerate with
``scripts/gen_proto.sh``); import them from here so that layout stays one detail.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported by name so type checkers treat the messages as Any: protobuf ships no
# stubs in this environment, and the generated .pyi would drag that in.
pb: Any = importlib.import_module("leoflow.protocol.leoflow.agent.v1.agent_pb2")

SERVICE = "leoflow.agent.v1.Agent"
# Channel metadata: a random id per agent process, so that a Complete it resends after a
# broken stream is known as its own (the endpoint answers it as a duplicate).
AGENT_ID_METADATA = "x-leoflow-agent"
METHODS = ("Exchange", "Start", "Heartbeat", "Logs", "Complete", "ResolveSecret", "Channel")


def method_path(method: str) -> str:
    """The HTTP/2 path of one of ``METHODS``, as a channel or a server names it."""
    return f"/{SERVICE}/{method}"


__all__ = ["AGENT_ID_METADATA", "METHODS", "SERVICE", "method_path", "pb"]
