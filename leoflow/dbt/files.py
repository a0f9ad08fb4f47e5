"""Reading a dbt project's files without letting one of them stop the loader.

A project is a folder anyone with the DAG folder can put anything in: a FIFO (its
``open`` blocks until a writer comes, forever), a symlink to ``/dev/zero`` (its read
never ends), a 300 MB seed. So a file is read only when it is a regular file, checked
by ``stat`` before it is opened (opening a device can act on it) and by ``fstat``
after (it may have been swapped in between; the open is non-blocking, so a FIFO
swapped in does not hang it), in chunks, never past a bound, with a reason naming
the file when it is refused. A symlink is followed wherever it points, as dbt
follows it: dbt and the tasks run as the user reading it, so it crosses no boundary.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

CHUNK = 1 << 20
# What a file dbt parses (.sql, .yml ...) may hold: far more than any real one.
MAX_PARSED_FILE_BYTES = 64 << 20
# dbt's manifest of a very large project (tens of thousands of nodes) is a few hundred MB.
MAX_MANIFEST_BYTES = 512 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class RefusedFile(Exception):
    """A file Leoflow will not read; the message names it and says why."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"{path} {why}")


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def regular_stat(path: str) -> os.stat_result:
    """``stat`` of what ``path`` names, symlinks followed; RefusedFile unless a regular file.

    OSError (FileNotFoundError for a file removed meanwhile) goes to the caller."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        target = f" (a symlink to {os.path.realpath(path)})" if os.path.islink(path) else ""
        raise RefusedFile(path, f"is {_kind(info.st_mode)}{target}, not a regular file")
    return info


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    regular_stat(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(path, f"became {_kind(info.st_mode)} while it was read")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _too_big(path: str, limit: int, what: str) -> RefusedFile:
    return RefusedFile(path, f"holds more than {limit:,} bytes, the limit for {what}")


def _chunks(path: str, limit: int, what: str) -> Iterator[tuple[bytes, os.stat_result]]:
    """The regular file ``path`` in chunks, with its fstat; RefusedFile past ``limit``."""
    fd, info = _open_regular(path)
    try:
        # A file that says it is too big is refused unread; one that grows past what
        # it said (or a /proc file, which says 0) is cut off at the bound.
        if info.st_size > limit:
            raise _too_big(path, limit, what)
        total = 0
        while chunk := os.read(fd, CHUNK):
            total += len(chunk)
            if total > limit:
                raise _too_big(path, limit, what)
            yield chunk, info
    finally:
        os.close(fd)


def read_bounded(path: str, limit: int, what: str = "a file") -> bytes:
    """The whole content of the regular file ``path``; RefusedFile past ``limit`` bytes."""
    return b"".join(chunk for chunk, _ in _chunks(path, limit, what))


def digest_bounded(path: str, limit: int, what: str = "a file") -> tuple[bytes, float]:
    """sha256 of the regular file ``path`` and its mtime, read in chunks (memory stays
    at one chunk whatever the size); RefusedFile past ``limit`` bytes."""
    digest = hashlib.sha256()
    mtime = regular_stat(path).st_mtime
    for chunk, info in _chunks(path, limit, what):
        digest.update(chunk)
        mtime = info.st_mtime
    return digest.digest(), mtime
