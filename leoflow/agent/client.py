"""What the agent's connection to the control plane is made of: its options, its TLS
credentials, and the two ways a message can fail (``channel`` sends them)."""

from __future__ import annotations

from typing import Any

import grpc

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
CHANNEL_OPTIONS = [
    # Reconnect our own way (``channel``); keep gRPC's reconnect backoff short so
    # each of our attempts is a real connection attempt.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # A pod's HTTP(S)_PROXY is for the task, not for the control plane.
    ("grpc.enable_http_proxy", 0),
]


class Refused(Exception):
    """The control plane answered, and the answer was no."""

    def __init__(self, method: str, code: Any, details: str, *, resent: bool = False) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details
        # The message went out again after a broken connection: a refusal may mean the
        # first copy was recorded (say, a Complete whose reply was lost).
        self.resent = resent


class Unreachable(Exception):
    """The control plane could not be reached within the connect timeout."""


def channel_credentials(ca_file: str) -> Any:
    """TLS credentials that trust only the CA bundle in ``ca_file``.

    Raises ValueError naming the file when it cannot be read or holds no certificate."""
    try:
        with open(ca_file, "rb") as f:
            bundle = f.read()
    except OSError as exc:
        raise ValueError(
            f"LEOFLOW_AGENT_CA_FILE={ca_file}: cannot read the CA bundle: {exc}"
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in bundle:
        raise ValueError(
            f"LEOFLOW_AGENT_CA_FILE={ca_file}: expected PEM certificates (BEGIN CERTIFICATE)"
        )
    return grpc.ssl_channel_credentials(root_certificates=bundle)
