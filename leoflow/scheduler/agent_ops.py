"""What each agent message does, whichever way it came (a unary call or an item on the
Channel): check its bounds, authorize its session token, ask the backend, answer.

Every operation raises ``Refuse`` (a status code and a sentence) for what it will not
do; a refused message writes nothing to the backend. ``status_of`` turns whatever an
operation raised into the status the agent gets, for both transports.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NoReturn

import grpc

from leoflow.domain.credentials import (
    InvalidToken,
    SessionClaims,
    hash_ticket,
    new_claims,
    sign_session,
    verify_session,
)
from leoflow.protocol.agent_v1 import pb
from leoflow.scheduler.agent_backend import (
    AgentBackend,
    Outcome,
    SessionRefused,
    TaskSession,
    TicketUse,
)
from leoflow.scheduler.instruments import counter

log = logging.getLogger("leoflow.scheduler.agent_endpoint")
security_log = logging.getLogger("leoflow.security")

TICKET_REPLAYS = counter(
    "leoflow_agent_ticket_replays", "Agent tickets presented to Exchange a second time."
)
SECRET_DENIED = counter(
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
# Per-try memory (log ends, recorded completions); the oldest entry goes when full.
_TRY_MEMORY = 65536

TryKey = tuple[int, int]


class Refuse(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def parse(message_type: Any, raw: bytes) -> Any:
    try:
        return message_type.FromString(raw)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "malformed request") from exc


def status_of(exc: Exception, what: str) -> tuple[grpc.StatusCode, str]:
    """The status an agent gets for an operation that raised ``exc``."""
    if isinstance(exc, Refuse):
        return exc.code, exc.details
    if isinstance(exc, SessionRefused):
        return (
            grpc.StatusCode.PERMISSION_DENIED,
            str(exc) or "the task instance no longer accepts this session",
        )
    if getattr(exc, "unavailable", False):  # the store's database is down
        # UNAVAILABLE: nothing was done, so the agent tries the message again.
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    log.error("agent endpoint: %s failed", what, exc_info=exc)
    return grpc.StatusCode.INTERNAL, "internal error"


def describe(s: TaskSession) -> str:
    return f"{s.dag_id}/{s.run_id}/{s.task_id} try {s.try_number} (ti_pk={s.ti_pk})"


def _printable(text: str, limit: int = 200) -> str:
    """An attacker-chosen string made safe for one log line."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _remember(memory: dict[TryKey, Any], key: TryKey, value: Any) -> None:
    if key not in memory and len(memory) >= _TRY_MEMORY:
        del memory[next(iter(memory))]
    memory[key] = value


class AgentOps:
    def __init__(
        self, backend: AgentBackend, signing_key: bytes, *, session_ttl: float, heartbeat: float
    ) -> None:
        self.backend = backend
        self._key = signing_key
        self._ttl = session_ttl
        self._heartbeat_interval = heartbeat
        self._tokens: dict[str, SessionClaims] = {}
        self._log_ends: dict[TryKey, int] = {}
        self._completed: dict[TryKey, tuple[str, int]] = {}

    # -- authorization -----------------------------------------------------------------

    def claims(self, token: str | None) -> SessionClaims:
        """The verified claims of ``token``; Refuse(UNAUTHENTICATED) if it has none."""
        if not token:
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "missing session token")
        now = time.time()
        claims = self._tokens.get(token)
        if claims is None:
            try:
                claims = verify_session(token, self._key, now)
            except InvalidToken as exc:
                raise Refuse(
                    grpc.StatusCode.UNAUTHENTICATED, f"invalid session token: {exc.reason}"
                ) from None
            self._trust(token, claims)
        elif now >= claims.expires_at:
            del self._tokens[token]
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "invalid session token: expired")
        return claims

    def _trust(self, token: str, claims: SessionClaims) -> None:
        if len(self._tokens) >= _TOKEN_CACHE_SIZE:
            self._tokens.clear()
        self._tokens[token] = claims

    def _sign(self, claims: SessionClaims) -> str:
        """A new session token, trusted here from the start: the first message that
        bears it (the Start riding on its Exchange) need not verify our own MAC
        (~0.1 ms of the loop's time a task). It expires as any verified token does."""
        token = sign_session(claims, self._key)
        self._trust(token, claims)
        return token

    async def authorize(self, token: str | None) -> tuple[TaskSession, SessionClaims]:
        claims = self.claims(token)
        session = await self.backend.session(claims.ti_pk, claims.try_number)
        if (
            session is None
            or session.ti_pk != claims.ti_pk
            or session.try_number != claims.try_number
        ):
            raise Refuse(
                grpc.StatusCode.PERMISSION_DENIED,
                "this session's task instance is finished, superseded by another try, or gone",
            )
        return session, claims

    # -- operations --------------------------------------------------------------------

    async def exchange(self, request: Any, peer: str) -> Any:
        ticket: str = request.ticket
        if not ticket or len(ticket) > MAX_TICKET_CHARS:
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a ticket is 1 to 512 characters")
        now = time.time()
        use = await self.backend.consume_ticket(hash_ticket(ticket), now)
        if use.status == "replayed":
            await self._replay_alarm(use, peer)
        if use.status == "unknown":
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "unknown ticket")
        if use.status == "expired":
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "ticket expired")
        if use.status != "ok" or use.ti_pk is None or use.try_number is None:
            raise RuntimeError(f"consume_ticket returned {use!r}")
        session = await self.backend.session(use.ti_pk, use.try_number)
        if session is None:
            raise Refuse(
                grpc.StatusCode.PERMISSION_DENIED,
                "the ticket's task instance is finished, superseded by another try, or gone",
            )
        claims = new_claims(session.ti_pk, session.try_number, now=now, ttl=self._ttl)
        return pb.ExchangeResponse(
            session_token=self._sign(claims),
            dag_id=session.dag_id,
            run_id=session.run_id,
            task_id=session.task_id,
            try_number=session.try_number,
            heartbeat_interval_seconds=self._heartbeat_interval,
        )

    async def _replay_alarm(self, use: TicketUse, peer: str) -> NoReturn:
        TICKET_REPLAYS.inc()
        task = f"ti_pk={use.ti_pk} try {use.try_number}"
        if use.ti_pk is not None and use.try_number is not None:
            session = await self.backend.session(use.ti_pk, use.try_number)
            if session is not None:
                task = describe(session)
        security_log.warning(
            "SECURITY: ticket replayed: a second Exchange of the ticket of task %s from %s; "
            "the ticket may have leaked from the pod spec",
            task,
            peer,
        )
        raise Refuse(grpc.StatusCode.PERMISSION_DENIED, "ticket already used")

    async def start(self, token: str | None, request: Any) -> Any:
        if any(
            len(field) > MAX_START_FIELD_CHARS
            for field in (request.pod_name, request.pod_uid, request.hostname)
        ):
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a Start field is too long")
        session, _ = await self.authorize(token)
        spec = await self.backend.start(session, executor_ref=_executor_ref(request))
        return pb.StartResponse(
            argv=spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            timeout_seconds=spec.timeout_seconds or 0.0,
            secret_names=session.secrets,
            inputs=spec.inputs,
            output_limit_bytes=spec.output_limit,
        )

    async def heartbeat(self, token: str | None) -> Any:
        session, claims = await self.authorize(token)
        cancel = await self.backend.heartbeat(session)
        response = pb.HeartbeatResponse(
            cancel_requested=cancel, reason="cancellation requested" if cancel else ""
        )
        now = time.time()
        if claims.expires_at - now < self._ttl / 2:
            response.session_token = self._sign(
                new_claims(claims.ti_pk, claims.try_number, now=now, ttl=self._ttl)
            )
        return response

    @staticmethod
    def check_chunk(chunk: Any) -> None:
        if chunk.stream not in (pb.LogChunk.STDOUT, pb.LogChunk.STDERR):
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a log chunk names no stream")
        if len(chunk.data) > MAX_LOG_CHUNK:
            raise Refuse(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"a log chunk is at most {MAX_LOG_CHUNK} bytes"
            )

    async def append_log(self, token: str | None, chunk: Any, *, at_offset: bool) -> int:
        """Stores the chunk; returns how many of its bytes were new.

        ``at_offset`` (the Channel): the chunk says where it starts, so the part of a
        resent chunk already stored is acknowledged and not stored again."""
        self.check_chunk(chunk)
        session, _ = await self.authorize(token)
        data: bytes = chunk.data
        if not data:
            return 0
        if at_offset:
            key = (session.ti_pk, session.try_number)
            end = self._log_ends.get(key)
            if end is None:
                end = await self.backend.log_size(session)
            offset = int(chunk.offset)
            if offset + len(data) <= end:
                return 0
            if offset < end:
                data = data[end - offset :]
            await self.backend.append_log(session, data)
            _remember(self._log_ends, key, max(end, offset) + len(data))
            return len(data)
        await self.backend.append_log(session, data)
        return len(data)

    async def complete(
        self, token: str | None, request: Any, resend_key: tuple[str, int] | None = None
    ) -> Any:
        """``resend_key`` (the Channel: agent process and item id): the same item
        arriving again after its reply was lost is answered ``duplicate``; any other
        Complete for a finished try is refused."""
        if len(request.message) > MAX_COMPLETE_MESSAGE_CHARS:
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "the completion message is too long")
        if resend_key is not None:
            claims = self.claims(token)
            key = (claims.ti_pk, claims.try_number)
            if self._completed.get(key) == resend_key:
                return pb.CompleteResponse(duplicate=True)
        session, _ = await self.authorize(token)
        r = request
        output = r.output if r.HasField("output") else None
        outcome = Outcome(
            r.exit_code, r.oom_killed, r.timed_out, r.message, r.not_started, output, r.output_error
        )
        await self.backend.complete(session, outcome)
        key = (session.ti_pk, session.try_number)
        self._log_ends.pop(key, None)
        if token:  # the try is over: a later message with it is verified afresh
            self._tokens.pop(token, None)
        if resend_key is not None:
            _remember(self._completed, key, resend_key)
        return pb.CompleteResponse()

    async def resolve_secret(self, token: str | None, request: Any) -> Any:
        name: str = request.name
        if not name or len(name) > MAX_SECRET_NAME_CHARS:
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a secret name is 1 to 253 characters")
        session, _ = await self.authorize(token)
        if name not in session.secrets:
            SECRET_DENIED.labels(session.dag_id, session.task_id).inc()
            security_log.warning(
                "secret denied: task %s asked for secret %s, which it did not declare",
                describe(session),
                _printable(name),
            )
            raise Refuse(
                grpc.StatusCode.PERMISSION_DENIED, f"secret {name!r} is not declared by this task"
            )
        value = await self.backend.resolve_secret(session, name)
        if value is None:
            raise Refuse(grpc.StatusCode.NOT_FOUND, f"secret {name!r} cannot be resolved")
        return pb.ResolveSecretResponse(value=value)


def _executor_ref(request: Any) -> str:
    """``pod:<name>[@<uid>]`` for a pod, ``proc:<hostname>:<pid>`` for a Lite agent."""
    if request.pod_name:
        ref = f"pod:{request.pod_name}" + (f"@{request.pod_uid}" if request.pod_uid else "")
        # A warm pod's nth task: different for each task of one pod, so Start's
        # compare-and-set lets one pod, one hand-over, start a try.
        return ref + (f";warm={request.pod_task}" if request.pod_task > 0 else "")
    return f"proc:{request.hostname}:{request.pid}"
