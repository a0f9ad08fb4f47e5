"""Bounds on the connections the API's HTTP server holds (uvicorn's h11 protocol).

uvicorn bounds the size of a request head but not how long it may take to arrive,
nor how long a body may take, nor how many connections are open: 3,000 clients
dripping header bytes each held a descriptor for ever. This protocol adds:

- a deadline for each request head (from the connection's start, or the end of the
  previous response on a kept-alive connection) and for each body (from its head):
  past it the client gets 408 and the connection ends;
- a bound on open connections in total and per peer address. A connection that
  would pass a bound takes the place of the oldest connection, of that peer or of
  all, that is still waiting for its head — a stalled client, or an idle kept-alive
  one — so a flood of slow clients cannot lock out a request whose head arrives at
  once; only when every connection is busy with a request is the newcomer answered
  503 and closed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from leoflow.settings import Settings


@dataclass(frozen=True)
class ConnectionBounds:
    max_connections: int
    max_per_peer: int
    head_timeout: float
    body_timeout: float


@dataclass
class _Registry:
    """The open connections of one server: each one's peer, and which wait for a head
    (in the order they began to wait: the first is the one to give way)."""

    bounds: ConnectionBounds
    peers: dict[BoundedH11Protocol, str] = field(default_factory=dict)
    per_peer: Counter[str] = field(default_factory=Counter)
    waiting: dict[BoundedH11Protocol, None] = field(default_factory=dict)

    def admit(self, conn: BoundedH11Protocol, peer: str) -> bool:
        """Make room for ``conn`` (closing a stalled one if need be); False: no room."""
        if self.per_peer[peer] >= self.bounds.max_per_peer and not self._evict(peer):
            return False
        if len(self.peers) >= self.bounds.max_connections and not self._evict(None):
            return False
        self.peers[conn] = peer
        self.per_peer[peer] += 1
        return True

    def _evict(self, peer: str | None) -> bool:
        for victim in self.waiting:
            if peer is None or self.peers.get(victim) == peer:
                victim.give_way()
                return True
        return False

    def leave(self, conn: BoundedH11Protocol) -> None:
        self.waiting.pop(conn, None)
        peer = self.peers.pop(conn, None)
        if peer is not None:
            self.per_peer[peer] -= 1
            if self.per_peer[peer] <= 0:
                del self.per_peer[peer]


_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
)


def _raw(template: bytes, message: str) -> bytes:
    body = message.encode()
    return template % (len(body), body)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under ``registry``'s bounds (see the module docstring);
    ``protocol_for`` makes the subclass a server uses."""

    registry: ClassVar[_Registry]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._awaiting: str | None = None  # "head" or "body": what the deadline is for

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else ""
        if not self.registry.admit(self, peer):
            transport.write(
                _raw(_BUSY, "the server has no room for another connection; try again\n")
            )
            transport.close()
            return
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self.registry.leave(self)
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        # The transport moves to another protocol, which these bounds do not follow.
        self._cancel_deadline()
        self.registry.leave(self)
        super().handle_websocket_upgrade(event)

    def handle_events(self) -> None:
        super().handle_events()
        self._track()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()  # the next request's head, on a kept-alive connection

    def give_way(self) -> None:
        """Closed to make room for a new connection, while waiting for a head."""
        self.registry.waiting.pop(self, None)
        self.transport.close()

    def _track(self) -> None:
        if self._awaiting is None or self.transport.is_closing():
            return
        state = self.conn.their_state
        if self._awaiting == "head" and state is not h11.IDLE:
            self.registry.waiting.pop(self, None)
            self._cancel_deadline()
            if state is h11.SEND_BODY:
                self._arm("body", self.registry.bounds.body_timeout)
        elif self._awaiting == "body" and state is not h11.SEND_BODY:
            self._cancel_deadline()

    def _await_head(self) -> None:
        self.registry.waiting[self] = None
        self._arm("head", self.registry.bounds.head_timeout)

    def _arm(self, what: str, seconds: float) -> None:
        self._cancel_deadline()
        self._awaiting = what
        self._deadline = self.loop.call_later(seconds, self._expired, what, seconds)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._awaiting = None

    def _expired(self, what: str, seconds: float) -> None:
        self._deadline = None
        self._awaiting = None
        self.registry.waiting.pop(self, None)
        if self.transport.is_closing():
            return
        setting = "api_head_timeout" if what == "head" else "api_body_timeout"
        # Waiting for a head, no response is under way; for a body, one may be (a
        # refusal sent before the body was read): then the connection just ends.
        if what == "head" or self.cycle is None or not self.cycle.response_started:
            message = (
                f"the request {what} did not arrive within {seconds:g} s "
                f"({setting}, LEOFLOW_{setting.upper()})\n"
            )
            self.transport.write(_raw(_TIMEOUT, message))
        self.transport.close()


def protocol_for(settings: Settings) -> type[BoundedH11Protocol]:
    """A protocol class for one server: its connections share one registry."""
    bounds = ConnectionBounds(
        settings.api_max_connections,
        settings.api_max_connections_per_peer,
        settings.api_head_timeout,
        settings.api_body_timeout,
    )
    return type("ServerH11Protocol", (BoundedH11Protocol,), {"registry": _Registry(bounds)})
