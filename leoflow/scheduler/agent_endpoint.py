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

Requests are deserialized here rather than by gRPC so that garbage gets INVALID_ARGUMENT
and not gRPC's generic INTERNAL. A refused call writes nothing to the backend. A Logs
stream writes each chunk as it arrives, so when an agent disconnects mid-stream what
arrived is kept and nothing else is written. (gRPC ends the request stream of a peer
that vanished as it ends a half-closed one, so such a stream is counted with code OK.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

import grpc
from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily

from leoflow.domain.credentials import (
    InvalidToken,
    SessionClaims,
    hash_ticket,
    new_claims,
    sign_session,
    verify_session,
)
from leoflow.protocol.agent_v1 import SERVICE, pb

log = logging.getLogger("leoflow.scheduler.agent_endpoint")
security_log = logging.getLogger("leoflow.security")


class _CallCounts:
    """``leoflow_grpc_requests_total{method,code}``, counted in a plain dict.

    A prometheus_client Counter takes a lock per increment; on the heartbeat path a
    dict increment is a tenth of that. Exported by this collector on scrape."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def collect(self) -> Any:
        family = CounterMetricFamily(
            "leoflow_grpc_requests",
            "Agent gRPC calls by method and status code.",
            labels=["method", "code"],
        )
        for (method, code), value in list(self.counts.items()):
            family.add_metric([method, code], value)
        yield family


GRPC_REQUESTS = _CallCounts()
REGISTRY.register(GRPC_REQUESTS)
TICKET_REPLAYS = Counter(
    "leoflow_agent_ticket_replays", "Agent tickets presented to Exchange a second time."
)
SECRET_DENIED = Counter(
    "leoflow_secret_denied",
    "ResolveSecret calls for a secret the task did not declare.",
    ["dag_id", "task_id"],
)

MAX_LOG_CHUNK = 1024 * 1024
MAX_TICKET_CHARS = 512
MAX_SECRET_NAME_CHARS = 253
MAX_COMPLETE_MESSAGE_CHARS = 64 * 1024
MAX_START_FIELD_CHARS = 1024
# Verified tokens, so a heartbeat costs a dict lookup rather than an HMAC and a JSON
# parse. Bounded; cleared when full (the next calls simply verify again).
_TOKEN_CACHE_SIZE = 65536


@dataclass(frozen=True)
class TaskSession:
    ti_pk: int
    try_number: int
    dag_id: str
    run_id: str
    task_id: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class TicketUse:
    status: Literal["ok", "unknown", "replayed", "expired"]
    ti_pk: int | None
    try_number: int | None


@dataclass(frozen=True)
class StartSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout_seconds: float | None


class SessionRefused(Exception):
    """A backend may raise this from any call when the task instance stopped accepting
    the session after ``session()`` answered (it turned terminal, another try began).
    The agent gets PERMISSION_DENIED."""


class AgentBackend(Protocol):
    async def consume_ticket(self, ticket_hash: str, now: float) -> TicketUse: ...

    async def session(self, ti_pk: int, try_number: int) -> TaskSession | None:
        """None: no such task instance, the try is not the current one, or it is terminal."""
        ...

    async def start(self, s: TaskSession, *, executor_ref: str) -> StartSpec:
        """Marks the task instance running."""
        ...

    async def heartbeat(self, s: TaskSession) -> bool:
        """True: cancellation requested."""
        ...

    async def append_log(self, s: TaskSession, data: bytes) -> None: ...

    async def complete(
        self,
        s: TaskSession,
        *,
        exit_code: int,
        oom_killed: bool,
        timed_out: bool,
        message: str,
        not_started: bool = False,
    ) -> None:
        """``not_started``: the agent failed before the command ran; ``message`` says why."""
        ...

    async def resolve_secret(self, s: TaskSession, name: str) -> str | None:
        """Only called for declared names; None: it cannot be resolved."""
        ...


class _Refuse(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _parse(message_type: Any, raw: bytes) -> Any:
    try:
        return message_type.FromString(raw)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "malformed request") from exc


def _describe(s: TaskSession) -> str:
    return f"{s.dag_id}/{s.run_id}/{s.task_id} try {s.try_number} (ti_pk={s.ti_pk})"


def _printable(text: str, limit: int = 200) -> str:
    """An attacker-chosen string made safe for one log line."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


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
    ) -> None:
        sign_session(new_claims(0, 0, now=0.0, ttl=1.0), signing_key)  # rejects weak keys now
        if session_ttl <= 0 or heartbeat_interval <= 0 or max_message_bytes <= 0:
            raise ValueError("session_ttl, heartbeat_interval and max_message_bytes must be > 0")
        self._backend = backend
        self._key = signing_key
        self._ttl = session_ttl
        self._heartbeat_interval = heartbeat_interval
        self._max_message_bytes = max_message_bytes
        self._server: grpc.aio.Server | None = None
        self._tokens: dict[str, SessionClaims] = {}

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
        return handlers

    def _counted(
        self, method: str, fn: Callable[[Any, Context], Awaitable[Any]]
    ) -> Callable[[Any, Context], Awaitable[Any]]:
        counts = GRPC_REQUESTS.counts
        ok = (method, "OK")
        counts.setdefault(ok, 0)

        def count(code: grpc.StatusCode) -> None:
            # Before the status goes out, so a client that saw it sees it counted.
            key = (method, code.name)
            counts[key] = counts.get(key, 0) + 1

        async def handler(request: Any, context: Context) -> Any:
            try:
                response = await fn(request, context)
            except _Refuse as refusal:
                count(refusal.code)
                await context.abort(refusal.code, refusal.details)
            except SessionRefused as refused:
                count(grpc.StatusCode.PERMISSION_DENIED)
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    str(refused) or "the task instance no longer accepts this session",
                )
            except asyncio.CancelledError:
                count(grpc.StatusCode.CANCELLED)
                raise
            except Exception as exc:
                if getattr(exc, "unavailable", False):  # the store's database is down
                    # UNAVAILABLE: nothing was done, so the agent tries the call again.
                    count(grpc.StatusCode.UNAVAILABLE)
                    await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
                count(grpc.StatusCode.INTERNAL)
                log.exception("agent endpoint: %s failed", method)
                await context.abort(grpc.StatusCode.INTERNAL, "internal error")
            counts[ok] += 1
            return response

        return handler

    async def _authorize(self, context: Context) -> tuple[TaskSession, SessionClaims]:
        token = None
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                token = value
                break
        if not isinstance(token, str) or not token.startswith("Bearer "):
            raise _Refuse(grpc.StatusCode.UNAUTHENTICATED, "missing session token")
        token = token[7:]
        now = time.time()
        claims = self._tokens.get(token)
        if claims is None:
            try:
                claims = verify_session(token, self._key, now)
            except InvalidToken as exc:
                raise _Refuse(
                    grpc.StatusCode.UNAUTHENTICATED, f"invalid session token: {exc.reason}"
                ) from None
            if len(self._tokens) >= _TOKEN_CACHE_SIZE:
                self._tokens.clear()
            self._tokens[token] = claims
        elif now >= claims.expires_at:
            del self._tokens[token]
            raise _Refuse(grpc.StatusCode.UNAUTHENTICATED, "invalid session token: expired")
        session = await self._backend.session(claims.ti_pk, claims.try_number)
        if (
            session is None
            or session.ti_pk != claims.ti_pk
            or session.try_number != claims.try_number
        ):
            raise _Refuse(
                grpc.StatusCode.PERMISSION_DENIED,
                "this session's task instance is finished, superseded by another try, or gone",
            )
        return session, claims

    # -- methods -----------------------------------------------------------------------

    async def _exchange(self, raw: bytes, context: Context) -> Any:
        request = _parse(pb.ExchangeRequest, raw)
        ticket: str = request.ticket
        if not ticket or len(ticket) > MAX_TICKET_CHARS:
            raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a ticket is 1 to 512 characters")
        now = time.time()
        use = await self._backend.consume_ticket(hash_ticket(ticket), now)
        if use.status == "replayed":
            await self._replay_alarm(use, context)
        if use.status == "unknown":
            raise _Refuse(grpc.StatusCode.UNAUTHENTICATED, "unknown ticket")
        if use.status == "expired":
            raise _Refuse(grpc.StatusCode.UNAUTHENTICATED, "ticket expired")
        if use.status != "ok" or use.ti_pk is None or use.try_number is None:
            raise RuntimeError(f"consume_ticket returned {use!r}")
        session = await self._backend.session(use.ti_pk, use.try_number)
        if session is None:
            raise _Refuse(
                grpc.StatusCode.PERMISSION_DENIED,
                "the ticket's task instance is finished, superseded by another try, or gone",
            )
        claims = new_claims(session.ti_pk, session.try_number, now=now, ttl=self._ttl)
        token = sign_session(claims, self._key)
        return pb.ExchangeResponse(
            session_token=token,
            dag_id=session.dag_id,
            run_id=session.run_id,
            task_id=session.task_id,
            try_number=session.try_number,
            heartbeat_interval_seconds=self._heartbeat_interval,
        )

    async def _replay_alarm(self, use: TicketUse, context: Context) -> NoReturn:
        TICKET_REPLAYS.inc()
        task = f"ti_pk={use.ti_pk} try {use.try_number}"
        if use.ti_pk is not None and use.try_number is not None:
            session = await self._backend.session(use.ti_pk, use.try_number)
            if session is not None:
                task = _describe(session)
        security_log.warning(
            "SECURITY: ticket replayed: a second Exchange of the ticket of task %s from %s; "
            "the ticket may have leaked from the pod spec",
            task,
            context.peer(),
        )
        raise _Refuse(grpc.StatusCode.PERMISSION_DENIED, "ticket already used")

    async def _start(self, raw: bytes, context: Context) -> Any:
        request = _parse(pb.StartRequest, raw)
        if any(
            len(field) > MAX_START_FIELD_CHARS
            for field in (request.pod_name, request.pod_uid, request.hostname)
        ):
            raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a Start field is too long")
        session, _ = await self._authorize(context)
        spec = await self._backend.start(session, executor_ref=_executor_ref(request))
        return pb.StartResponse(
            argv=spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            timeout_seconds=spec.timeout_seconds or 0.0,
            secret_names=session.secrets,
        )

    async def _heartbeat(self, raw: bytes, context: Context) -> Any:
        _parse(pb.HeartbeatRequest, raw)
        session, claims = await self._authorize(context)
        cancel = await self._backend.heartbeat(session)
        response = pb.HeartbeatResponse(
            cancel_requested=cancel, reason="cancellation requested" if cancel else ""
        )
        now = time.time()
        if claims.expires_at - now < self._ttl / 2:
            response.session_token = sign_session(
                new_claims(claims.ti_pk, claims.try_number, now=now, ttl=self._ttl), self._key
            )
        return response

    async def _logs(self, requests: AsyncIterator[bytes], context: Context) -> Any:
        try:
            return await self._logs_checked(requests, context)
        except _Refuse:
            await _drain(requests)
            raise

    async def _logs_checked(self, requests: AsyncIterator[bytes], context: Context) -> Any:
        session, _ = await self._authorize(context)
        received = 0
        first = True
        async for raw in requests:
            chunk = _parse(pb.LogChunk, raw)
            if chunk.stream not in (pb.LogChunk.STDOUT, pb.LogChunk.STDERR):
                raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a log chunk names no stream")
            if len(chunk.data) > MAX_LOG_CHUNK:
                raise _Refuse(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"a log chunk is at most {MAX_LOG_CHUNK} bytes",
                )
            if not first:
                # The task instance may have turned terminal while the stream was open.
                session, _ = await self._authorize(context)
            first = False
            if chunk.data:
                await self._backend.append_log(session, chunk.data)
                received += len(chunk.data)
        return pb.LogsAck(bytes_received=received)

    async def _complete(self, raw: bytes, context: Context) -> Any:
        request = _parse(pb.CompleteRequest, raw)
        if len(request.message) > MAX_COMPLETE_MESSAGE_CHARS:
            raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "the completion message is too long")
        session, _ = await self._authorize(context)
        await self._backend.complete(
            session,
            exit_code=request.exit_code,
            oom_killed=request.oom_killed,
            timed_out=request.timed_out,
            message=request.message,
            not_started=request.not_started,
        )
        return pb.CompleteResponse()

    async def _resolve_secret(self, raw: bytes, context: Context) -> Any:
        request = _parse(pb.ResolveSecretRequest, raw)
        name: str = request.name
        if not name or len(name) > MAX_SECRET_NAME_CHARS:
            raise _Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a secret name is 1 to 253 characters")
        session, _ = await self._authorize(context)
        if name not in session.secrets:
            SECRET_DENIED.labels(session.dag_id, session.task_id).inc()
            security_log.warning(
                "secret denied: task %s asked for secret %s, which it did not declare",
                _describe(session),
                _printable(name),
            )
            raise _Refuse(
                grpc.StatusCode.PERMISSION_DENIED, f"secret {name!r} is not declared by this task"
            )
        value = await self._backend.resolve_secret(session, name)
        if value is None:
            raise _Refuse(grpc.StatusCode.NOT_FOUND, f"secret {name!r} cannot be resolved")
        return pb.ResolveSecretResponse(value=value)


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


def _executor_ref(request: Any) -> str:
    """``pod:<name>[@<uid>]`` for a pod, ``proc:<hostname>:<pid>`` for a Lite agent."""
    if request.pod_name:
        return f"pod:{request.pod_name}" + (f"@{request.pod_uid}" if request.pod_uid else "")
    return f"proc:{request.hostname}:{request.pid}"


def _dial_address(listen: str, port: int) -> str:
    if listen.startswith("unix:") or listen.startswith("unix-abstract:"):
        return listen
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"
