"""Reading a DAG file's text: bounded, without blocking, regular files only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from leoflow.dagfile.problems import DagFileError, DagFileGone, Problem
from leoflow.dagfile.walk import refusal
from leoflow.dagfile.yamldoc import MAX_DOCUMENT_CHARS


def read_dag_text(path: Path) -> str:
    """The file's text, or DagFileError. At most one byte past the limit is read, so a
    huge file costs nothing. It is opened without blocking and checked once open: a
    FIFO, a socket or a device under a .yaml name (or swapped in after a listing saw a
    regular file) is refused, never waited on."""
    limit = MAX_DOCUMENT_CHARS
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise DagFileGone(path, [Problem("", "no such file")]) from exc
    except OSError as exc:
        raise DagFileError(path, [Problem("", f"cannot read file: {exc}")]) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DagFileError(path, [Problem("", refusal(mode, path.is_symlink()))])
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise DagFileError(
                path, [Problem("", f"the file is larger than {limit:,} bytes, the limit")]
            )
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DagFileError(path, [Problem("", f"cannot read file: {exc}")]) from exc
    finally:
        if fd >= 0:
            os.close(fd)
