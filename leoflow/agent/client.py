"""The agent's one gRPC channel to the control plane, and its retry rule.

Only UNAVAILABLE is retried, with exponential backoff, until ``connect_timeout``
has passed since the first attempt: that is the status of a call that never
reached a server, so retrying it cannot do anything twice (a single-use ticket in
particular).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from leoflow.protocol.agent_v1 import method_path, pb

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
CALL_TIMEOUT = 30.0
_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 2.0


class Refused(Exception):
    """The control plane answered, and the answer was no."""

    def __init__(self, method: str, code: Any, details: str) -> None:
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


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


class Client:
    def __init__(self, target: str, *, connect_timeout: float, credentials: Any = None) -> None:
        """``credentials`` (from ``channel_credentials``): TLS; None: plaintext."""
        self.target = target
        self.connect_timeout = connect_timeout
        options = [
            # Retry our own way (see above); keep gRPC's reconnect backoff short so
            # each of our attempts is a real connection attempt.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # A pod's HTTP(S)_PROXY is for the task, not for the control plane.
            ("grpc.enable_http_proxy", 0),
        ]
        if credentials is not None:
            self.channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options)

        def unary(name: str, response: Any) -> Any:
            return self.channel.unary_unary(
                method_path(name),
                request_serializer=_serialize,
                response_deserializer=response.FromString,
                _registered_method=True,
            )

        self._methods = {
            "Exchange": unary("Exchange", pb.ExchangeResponse),
            "Start": unary("Start", pb.StartResponse),
            "Heartbeat": unary("Heartbeat", pb.HeartbeatResponse),
            "Complete": unary("Complete", pb.CompleteResponse),
            "ResolveSecret": unary("ResolveSecret", pb.ResolveSecretResponse),
        }
        self._logs = self.channel.stream_unary(
            method_path("Logs"),
            request_serializer=_serialize,
            response_deserializer=pb.LogsAck.FromString,
            _registered_method=True,
        )

    async def close(self) -> None:
        await self.channel.close()

    async def call(
        self, method: str, request: Any, token: str | None, *, rpc_timeout: float = CALL_TIMEOUT
    ) -> Any:
        """One unary call, retried while UNAVAILABLE; raises Refused or Unreachable."""
        metadata = _metadata(token)
        started = time.monotonic()
        attempts = 0
        backoff = _FIRST_BACKOFF
        while True:
            attempts += 1
            try:
                return await self._methods[method](request, metadata=metadata, timeout=rpc_timeout)
            except grpc.aio.AioRpcError as exc:
                code, details = exc.code(), exc.details() or ""
            if code != grpc.StatusCode.UNAVAILABLE:
                raise Refused(method, code, details)
            elapsed = time.monotonic() - started
            if elapsed + backoff > self.connect_timeout:
                raise Unreachable(
                    f"could not reach the control plane at {self.target}: "
                    f"{attempts} attempt{'s' if attempts != 1 else ''} over {elapsed:.1f}s "
                    f"(LEOFLOW_AGENT_CONNECT_TIMEOUT={self.connect_timeout:g}s); "
                    f"last error: {details}"
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    async def heartbeat(self, token: str, rpc_timeout: float) -> Any:
        """One attempt; the heartbeat loop is its own retry."""
        return await self._methods["Heartbeat"](
            pb.HeartbeatRequest(), metadata=_metadata(token), timeout=rpc_timeout
        )

    def logs(self, token: str) -> Any:
        """A new Logs client stream: ``write`` chunks, ``done_writing``, await the ack."""
        return self._logs(metadata=_metadata(token))


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()  # type: ignore[no-any-return]


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return () if token is None else (("authorization", f"Bearer {token}"),)
