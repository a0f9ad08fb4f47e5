"""The default secret backend: one file per secret name in a directory.

In Kubernetes the directory is a Secret mounted into the scheduler (each key a file,
reached through the kubelet's ``..data`` symlinks); in Lite it is ``LEOFLOW_SECRETS_DIR``.

A value is the file's content exactly: Kubernetes adds no trailing newline to a
Secret's files, so none is stripped here either (a value that ends in a newline
keeps it). Values must be UTF-8; anything else is reported unresolvable.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

log = logging.getLogger("leoflow.secrets")

# A Kubernetes Secret key's alphabet; no separators, so a name cannot leave the directory.
_NAME = re.compile(r"[-._a-zA-Z0-9]{1,253}")
MAX_SECRET_BYTES = 1024 * 1024  # a Kubernetes Secret's own limit


def valid_secret_name(name: str) -> bool:
    """A name that maps to exactly one file directly inside the directory.

    Refuses ``.``, ``..`` and the kubelet's own ``..data``-style entries."""
    return bool(_NAME.fullmatch(name)) and not name.startswith("..") and name != "."


class DirectorySecrets:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def names(self) -> set[str]:
        """The secret names the directory holds now (none if it is missing): what a DAG's
        ``notify:`` is checked against when it loads. Blocking; a listing, no values."""
        try:
            entries = list(self.path.iterdir())
        except OSError:
            return set()
        return {e.name for e in entries if valid_secret_name(e.name) and e.is_file()}

    def describe(self) -> str:
        return f"the secrets directory {self.path} (LEOFLOW_SECRETS_DIR)"

    async def get(self, name: str) -> str | None:
        if not valid_secret_name(name):
            return None
        return await asyncio.to_thread(self._read, name)

    def _read(self, name: str) -> str | None:
        try:
            with open(self.path / name, "rb") as f:
                data = f.read(MAX_SECRET_BYTES + 1)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            log.warning("secret %r in %s is unreadable: %s", name, self.path, exc.strerror)
            return None
        if len(data) > MAX_SECRET_BYTES:
            log.warning("secret %r in %s is over %d bytes", name, self.path, MAX_SECRET_BYTES)
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            log.warning("secret %r in %s is not UTF-8 text", name, self.path)
            return None
