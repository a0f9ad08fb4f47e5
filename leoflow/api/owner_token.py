"""Lite's owner token: who may drive a Lite that has no tokens file.

Loopback is no boundary between the users of one host: any of them can connect to
127.0.0.1. So a Lite without ``api_tokens_file`` accepts only an admin token of its
own, kept with the URL it serves in ``$LEOFLOW_HOME/api-token`` — mode 0600, owned by
Lite's user, as Jupyter does with its token. The token is made on the first start and
kept by the next ones (a browser stays logged in across a restart); delete the file
to get a new one. The CLI of the same user reads the file and sends the token to that
URL only, and only when the socket listening there belongs to this user (Linux's
``/proc/net/tcp``): another user who binds the port while Lite is down gets nothing.
So ``leoflow runs`` against a local Lite works as before, and another user can read
neither the file nor, without it, the API.

Stdlib only: the CLI imports this before any HTTP call.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

FILE_NAME = "api-token"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def token_path(home: Path) -> Path:
    return home / FILE_NAME


def new_token() -> str:
    return secrets.token_urlsafe(32)


def load_or_create(home: Path) -> str:
    """The token an earlier start wrote (if the file is sound and this user's), else a new one."""
    data = _read(token_path(home))
    token = data.get("token") if data is not None else None
    return token if isinstance(token, str) and len(token) >= 32 else new_token()


def write(home: Path, url: str, token: str) -> Path:
    """Write the token file, readable by this user only, replacing any older one."""
    home.mkdir(parents=True, exist_ok=True)
    path = token_path(home)
    staging = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    # Created 0600 (O_EXCL: never through a planted file or link), then renamed over.
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"url": url, "token": token, "pid": os.getpid()}, out)
            out.write("\n")
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    return path


def _read(path: Path) -> dict[str, object] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8") as src:
        st = os.fstat(src.fileno())
        # Only a file of this user that nobody else may read or write is taken.
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None
        try:
            data = json.loads(src.read(4096))
        except (ValueError, UnicodeDecodeError):
            return None
    return data if isinstance(data, dict) else None


def _origin(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    return (host, port) if host in _LOOPBACK else None


def token_for(home: Path, server: str) -> str | None:
    """The owner token, if ``server`` is the loopback address the Lite of ``home``
    serves on (any loopback name, the same port): the token goes nowhere else."""
    data = _read(token_path(home))
    if data is None:
        return None
    token, url = data.get("token"), data.get("url")
    if not isinstance(token, str) or not isinstance(url, str):
        return None
    mine, theirs = _origin(url), _origin(server)
    if mine is None or theirs is None or mine[1] != theirs[1]:
        return None
    owners = listener_uids(mine[1])
    if owners and owners != {os.geteuid()}:
        return None  # someone else listens there now (Lite is down): send nothing
    return token


def listener_uids(port: int) -> set[int]:
    """The uids owning a TCP socket listening on ``port`` (empty where /proc says nothing)."""
    uids: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as rows:
                next(rows, None)
                for row in rows:
                    fields = row.split()
                    # local_address is HEXADDR:HEXPORT; state 0A is LISTEN; uid the 8th field
                    listening = len(fields) > 7 and fields[3] == "0A"
                    if listening and int(fields[1].rpartition(":")[2], 16) == port:
                        uids.add(int(fields[7]))
        except (OSError, ValueError):
            continue
    return uids
