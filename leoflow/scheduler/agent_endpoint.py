"""The agent gRPC endpoint (grpc.aio): what every task's ``leoflow agent`` dials.

It authenticates and authorizes; it keeps no task state. Everything it learns or
changes goes through an ``AgentBackend``, which the scheduler implements (serving
``session()`` from memory, since it runs on every call).

Status codes, all with a human-readable details string:

=====================  ====================================================================
UNAUTHENTICATED        no ``authorization: Bearer`` metadata; a malformed, forged, other-key
                       or expired session token; an unknown or expired ticket
PERMISSION_DENIED      a ticket exchanged a second time (security alarm + counter); a valid
                       token whose (task instance, try) no longer accepts it: the task
                       instance is terminal, another try is current, or it is gone; a
                       secret name the task did not declare (log line + counter)
NOT_FOUND              a declared secret the secret backend cannot resolve
INVALID_ARGUMENT       a request that does not parse, or a field out of bounds
RESOURCE_EXHAUSTED     a message over ``max_message_bytes`` (from gRPC itself) or a log
                       chunk over ``MAX_LOG_CHUNK``
INTERNAL               the backend raised something unexpected (logged with traceback)
=====================  ====================================================================

PERMISSION_DENIED rather than FAILED_PRECONDITION for a finished task instance: the
caller is authenticated but the credential no longer authorizes anything, and the agent
treats that as final (it stops the command) rather than as a state to wait out.

The same messages also travel as items on the Channel stream (``agent_channel``), one
per agent process, each item with its own token and its own status in its reply. The
agent of this release speaks only the Channel; the unary methods stay for one release,
for agents of the previous one (a task pod started before a rolling upgrade of the
scheduler, or a DAG whose image pins an older Leoflow).

Requests are deserialized here rather than by gRPC so that garbage gets INVALID_ARGUMENT
and not gRPC's generic INTERNAL. A refused call writes nothing to the backend. A Logs
stream writes each chunk as it arrives, so when an agent disconnects mid-stream what
arrived is kept and nothing else is written. (gRPC ends the request stream of a peer
that vanished as it ends a half-closed one, so such a stream is counted with code OK.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from leoflow.domain.credentials import new_claims, sign_session
from leoflow.protocol.agent_v1 import SERVICE, pb
from leoflow.scheduler.agent_backend import (
    AgentBackend,
    Outcome,
    SessionRefused,
    StartSpec,
    TaskSession,
    TicketUse,
)
from leoflow.scheduler.agent_bounds import ConnectionBounds
from leoflow.scheduler.agent_channel import ChannelHandler
from leoflow.scheduler.agent_ops import (
    MAX_LOG_CHUNK,
    SECRET_DENIED,
    TICKET_REPLAYS,
    AgentOps,
    Refuse,
    parse,
    status_of,
)
from leoflow.scheduler.agent_warm import WarmOps
from leoflow.scheduler.instruments import register_collector

log = logging.getLogger("leoflow.scheduler.agent_endpoint")

__all__ = [
    "MAX_LOG_CHUNK",
    "SECRET_DENIED",
    "TICKET_REPLAYS",
    "AgentBackend",
    "AgentEndpoint",
    "Outcome",
    "SessionRefused",
    "StartSpec",
    "TaskSession",
    "TicketUse",
]


class _CallCounts:
    """``leoflow_grpc_requests_total{method,code}``, counted in a plain dict.

    A prometheus_client Counter takes a lock per increment; on the heartbeat path a
    dict increment is a tenth of that. Exported by this collector on scrape. Items on
    the Channel count as ``Channel.<Method>``."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily  # only a scrape needs it

        family = CounterMetricFamily(
            "leoflow_grpc_requests",
            "Agent gRPC calls by method and status code.",
            labels=["method", "code"],
        )
        for (method, code), value in list(self.counts.items()):
            family.add_metric([method, code], value)
        yield family


GRPC_REQUESTS = _CallCounts()
register_collector(GRPC_REQUESTS)

Context = Any  # grpc.aio.ServicerContext; grpc ships no type information


class AgentEndpoint:
    def __init__(
        self,
        backend: AgentBackend,
        signing_key: bytes,
        *,
        session_ttl: float = 86400,
        heartbeat_interval: float = 5.0,
        max_message_bytes: int = 4 * 1024 * 1024,
        bounds: ConnectionBounds | None = None,
    ) -> None:
        sign_session(new_claims(0, 0, now=0.0, ttl=1.0), signing_key)  # rejects weak keys now
        if session_ttl <= 0 or heartbeat_interval <= 0 or max_message_bytes <= 0:
            raise ValueError("session_ttl, heartbeat_interval and max_message_bytes must be > 0")
        self._ops = AgentOps(
            backend, signing_key, session_ttl=session_ttl, heartbeat=heartbeat_interval
        )
        warm = WarmOps(backend, signing_key, session_ttl=session_ttl)
        self._channel = ChannelHandler(self._ops, GRPC_REQUESTS.counts, warm)
        self._max_message_bytes = max_message_bytes
        self._bounds = bounds if bounds is not None else ConnectionBounds()
        self._server: grpc.aio.Server | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, listen: str, *, tls: Any = None) -> str:
        """Serve on ``listen`` ("127.0.0.1:0", "unix:/path", "0.0.0.0:50051"); returns
        the address to dial (a wildcard host becomes loopback, port 0 the bound port).

        ``tls`` (server credentials, e.g. ``ReloadingCertificate.credentials()``) makes
        the port TLS-only; without it the port is plaintext (Lite on loopback)."""
        if self._server is not None:
            raise RuntimeError("the agent endpoint is already started")
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_message_bytes),
                ("grpc.max_send_message_length", self._max_message_bytes),
                ("grpc.so_reuseport", 0),
                *self._bounds.server_options(),
            ]
        )
        handlers = self._handlers()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        server.add_registered_method_handlers(SERVICE, handlers)
        try:
            if tls is not None:
                port = server.add_secure_port(listen, tls)
            else:
                port = server.add_insecure_port(listen)
        except RuntimeError as exc:
            raise OSError(f"agent endpoint: cannot listen on {listen}: {exc}") from exc
        await server.start()
        self._server = server
        address = _dial_address(listen, port)
        log.info("agent endpoint listening on %s", address)
        return address

    async def stop(self, grace: float = 1.0) -> None:
        server, self._server = self._server, None
        if server is not None:
            await self._channel.stop()
            await server.stop(grace)

    # -- plumbing ----------------------------------------------------------------------

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        def out(message: Any) -> bytes:
            return message.SerializeToString()  # type: ignore[no-any-return]

        unary = {
            "Exchange": self._exchange,
            "Start": self._start,
            "Heartbeat": self._heartbeat,
            "Complete": self._complete,
            "ResolveSecret": self._resolve_secret,
        }
        handlers: dict[str, grpc.RpcMethodHandler] = {
            name: grpc.unary_unary_rpc_method_handler(
                self._counted(name, fn), request_deserializer=None, response_serializer=out
            )
            for name, fn in unary.items()
        }
        handlers["Logs"] = grpc.stream_unary_rpc_method_handler(
            self._counted("Logs", self._logs), request_deserializer=None, response_serializer=out
        )
        handlers["Channel"] = grpc.stream_stream_rpc_method_handler(
            self._channel.serve, request_deserializer=None, response_serializer=None
        )
        return handlers

    def _counted(
        self, method: str, fn: Callable[[Any, Context], Awaitable[Any]]
    ) -> Callable[[Any, Context], Awaitable[Any]]:
        counts = GRPC_REQUESTS.counts
        ok = (method, "OK")
        counts.setdefault(ok, 0)

        async def handler(request: Any, context: Context) -> Any:
            try:
                response = await fn(request, context)
            except asyncio.CancelledError:
                key = (method, "CANCELLED")
                counts[key] = counts.get(key, 0) + 1
                raise
            except Exception as exc:
                code, details = status_of(exc, method)
                # Before the status goes out, so a client that saw it sees it counted.
                key = (method, code.name)
                counts[key] = counts.get(key, 0) + 1
                await context.abort(code, details)
            counts[ok] += 1
            return response

        return handler

    # -- the unary methods (agents of the previous release) ------------------------------

    async def _exchange(self, raw: bytes, context: Context) -> Any:
        return await self._ops.exchange(parse(pb.ExchangeRequest, raw), context.peer())

    async def _start(self, raw: bytes, context: Context) -> Any:
        return await self._ops.start(_token(context), parse(pb.StartRequest, raw))

    async def _heartbeat(self, raw: bytes, context: Context) -> Any:
        parse(pb.HeartbeatRequest, raw)
        return await self._ops.heartbeat(_token(context))

    async def _logs(self, requests: AsyncIterator[bytes], context: Context) -> Any:
        try:
            return await self._logs_checked(requests, context)
        except Refuse:
            await _drain(requests)
            raise

    async def _logs_checked(self, requests: AsyncIterator[bytes], context: Context) -> Any:
        token = _token(context)
        await self._ops.authorize(token)
        received = 0
        async for raw in requests:
            # Each chunk is authorized again: the task may have ended meanwhile.
            received += await self._ops.append_log(token, parse(pb.LogChunk, raw), at_offset=False)
        return pb.LogsAck(bytes_received=received)

    async def _complete(self, raw: bytes, context: Context) -> Any:
        return await self._ops.complete(_token(context), parse(pb.CompleteRequest, raw))

    async def _resolve_secret(self, raw: bytes, context: Context) -> Any:
        return await self._ops.resolve_secret(_token(context), parse(pb.ResolveSecretRequest, raw))


def _token(context: Context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            if isinstance(value, str) and value.startswith("Bearer "):
                return value[7:]
            return None
    return None


# A refused Logs stream reads (and drops) at most this much more before it answers.
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 2.0


async def _drain(requests: AsyncIterator[bytes]) -> None:
    """Let the client finish writing, within a bound, before a refusal goes out.

    A grpc.aio client whose write fails because the RPC just ended replaces the
    status the server sent with INTERNAL "Internal error from Core" (grpc/grpc#36066):
    a refusal that races the client's next chunk reached it as INTERNAL about one
    time in ten under load, instead of UNAUTHENTICATED or PERMISSION_DENIED. Read to
    the client's half-close, so its writes succeed and the status arrives as sent.
    Nothing read here is parsed or written; a client still writing after the bound
    gets the refusal then, whatever its library makes of it.
    """
    received = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for raw in requests:
                received += len(raw)
                if received > DRAIN_BYTES:
                    return
    except (TimeoutError, grpc.aio.AioRpcError, grpc.RpcError):
        return


def _dial_address(listen: str, port: int) -> str:
    if listen.startswith("unix:") or listen.startswith("unix-abstract:"):
        return listen
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"
