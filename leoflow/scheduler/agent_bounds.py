"""How many connections the agent endpoint holds, and for how long: gRPC server options.

Each of these is a gRPC C-core channel argument that grpcio (1.85) enforces itself, so
no connection is ever handled in Python:

- ``grpc.max_allowed_incoming_connections``: past this many open connections, a new one
  is accepted and closed at once (before any handshake), so a flood costs no descriptor
  beyond the bound. The bound never exceeds half the process's descriptor limit: the
  rest is the store's, the HTTP API's and the tasks' pipes.
- ``grpc.server_handshake_timeout_ms``: a connection that has not completed its
  handshake (TLS, then the client's HTTP/2 preface and SETTINGS) by then is closed — a
  raw TCP connection that never speaks holds its descriptor that long, no longer.
- ``grpc.max_connection_idle_ms``: a connection without a call for this long is sent
  GOAWAY and closed. An agent's Channel stream is a call for as long as it is open, so
  a task's stream is never idle, however quiet; an agent between tasks simply dials
  again for its next one.
- ``grpc.keepalive_time_ms`` / ``grpc.keepalive_timeout_ms``: the server pings a
  connection that carries calls; one whose peer has vanished (a node gone, a half-open
  TCP) does not answer and is closed. ``grpc.http2.max_pings_without_data`` 0 lets those
  pings go on while a quiet task's stream carries nothing.
- ``grpc.max_concurrent_streams``: calls at once on one connection (an agent needs one).

gRPC has no per-peer connection bound and cannot be handed accepted sockets, so a peer
is bounded by the total and the timeouts (and, in Pro, by the chart's NetworkPolicy).
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

from leoflow.settings import Settings

log = logging.getLogger("leoflow.scheduler.agent_bounds")

# Descriptors the endpoint leaves to everything else in the process, at the least.
_RESERVED_FDS = 64


@dataclass(frozen=True)
class ConnectionBounds:
    max_connections: int = 4096
    handshake_timeout: float = 10.0
    idle_timeout: float = 300.0
    keepalive_interval: float = 60.0
    keepalive_timeout: float = 20.0
    max_streams_per_connection: int = 100

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionBounds:
        return cls(
            max_connections=settings.agent_max_connections,
            handshake_timeout=settings.agent_handshake_timeout,
            idle_timeout=settings.agent_idle_timeout,
            keepalive_interval=settings.agent_keepalive_interval,
            keepalive_timeout=settings.agent_keepalive_timeout,
            max_streams_per_connection=settings.agent_max_streams_per_connection,
        )

    def effective_max_connections(self) -> int:
        """The configured bound, at most half of the process's descriptor limit."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        room = max(1, min(soft // 2, soft - _RESERVED_FDS))
        if room < self.max_connections:
            log.warning(
                "agent endpoint: at most %d connections (agent_max_connections is %d, but "
                "this process may open only %d descriptors: raise its hard limit, ulimit -Hn)",
                room,
                self.max_connections,
                soft,
            )
        return min(room, self.max_connections)

    def server_options(self) -> list[tuple[str, int]]:
        def ms(seconds: float) -> int:
            return max(1, int(seconds * 1000))

        return [
            ("grpc.max_allowed_incoming_connections", self.effective_max_connections()),
            ("grpc.server_handshake_timeout_ms", ms(self.handshake_timeout)),
            ("grpc.max_connection_idle_ms", ms(self.idle_timeout)),
            ("grpc.keepalive_time_ms", ms(self.keepalive_interval)),
            ("grpc.keepalive_timeout_ms", ms(self.keepalive_timeout)),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
        ]
