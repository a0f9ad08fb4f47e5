"""Sockets for tests: a free local port, whether the peer closed a socket."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_by_peer(sock: socket.socket) -> bool:
    """The other end has closed this non-blocking socket (EOF or reset)."""
    try:
        return sock.recv(64) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
