"""The agent endpoint's side of warm pods (``leoflow agent --warm``), Channel only.

``pod_exchange`` trades a warm pod's single-use ticket for a pod session token;
``next_task`` (with that token) asks for the pod's next task and answers with that
task's own ticket, which the agent exchanges as any task's. A pod token authorizes
nothing else: every other message needs a task's session token, and a pod token
does not verify as one (``leoflow.domain.pod_credentials``).

Only the leader hands out work (its executor holds the queues). A replica that is
not the leader answers FAILED_PRECONDITION; the agent then dials again, through the
Service, until it reaches the leader.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import grpc

from leoflow.domain.credentials import InvalidToken, hash_ticket
from leoflow.domain.pod_credentials import new_pod_claims, sign_pod_session, verify_pod_session
from leoflow.domain.warm_pods import WarmWork
from leoflow.protocol.agent_v1 import pb
from leoflow.scheduler.agent_ops import MAX_TICKET_CHARS, Refuse

log = logging.getLogger("leoflow.scheduler.agent_endpoint")
security_log = logging.getLogger("leoflow.security")

NOT_LEADER = "this scheduler replica is not the leader; dial again to reach it"
# The longest a next_task is held before it is answered "no work" (the agent asks again).
MAX_WAIT = 600.0


class WarmOps:
    def __init__(self, backend: Any, signing_key: bytes, *, session_ttl: float) -> None:
        self._backend = backend
        self._key = signing_key
        self._ttl = session_ttl

    def _pool(self) -> WarmWork:
        finder = getattr(self._backend, "warm_work", None)
        pool = finder() if finder is not None else None
        if pool is None:
            raise Refuse(grpc.StatusCode.FAILED_PRECONDITION, NOT_LEADER)
        return pool  # type: ignore[no-any-return]

    async def pod_exchange(self, request: Any, peer: str) -> Any:
        ticket: str = request.ticket
        if not ticket or len(ticket) > MAX_TICKET_CHARS:
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, "a ticket is 1 to 512 characters")
        use = self._pool().use_pod_ticket(hash_ticket(ticket))
        if use is None:
            # A replay, or a pod a previous leader made that had not started yet.
            security_log.warning(
                "SECURITY: an unknown or already used warm-pod ticket from %s (a replay, "
                "or a pod of a previous leader that started after the failover)",
                peer,
            )
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "unknown or used pod ticket")
        claims = new_pod_claims(use.pod, use.dag_id, use.shape, now=time.time(), ttl=self._ttl)
        return pb.PodExchangeResponse(
            pod_token=sign_pod_session(claims, self._key),
            dag_id=use.dag_id,
            shape=use.shape,
            idle_timeout_seconds=use.idle_timeout,
            max_tasks=use.max_tasks,
        )

    async def next_task(self, token: str, request: Any) -> Any:
        now = time.time()
        try:
            claims = verify_pod_session(token, self._key, now)
        except InvalidToken as exc:
            raise Refuse(
                grpc.StatusCode.UNAUTHENTICATED, f"invalid pod session token: {exc.reason}"
            ) from None
        pool = self._pool()
        drained_of = getattr(self._backend, "drained", None)
        drained = drained_of(claims.dag_id) if drained_of is not None else ""
        wait = min(max(float(request.wait_seconds), 0.0), MAX_WAIT)
        work = await pool.next_task(
            claims.pod, claims.dag_id, claims.shape, done=request.done, wait=wait, drained=drained
        )
        fresh = new_pod_claims(claims.pod, claims.dag_id, claims.shape, now=now, ttl=self._ttl)
        return pb.NextTaskResponse(
            ticket=work.ticket,
            retire=work.retire,
            reason=work.reason,
            pod_token=sign_pod_session(fresh, self._key),
        )
