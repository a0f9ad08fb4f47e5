"""How a try's end is told: the agent's exit codes, the sentences for a command that
could not start or that ended, and the reason a command may leave in a file."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence

from leoflow.agent import held_dirs
from leoflow.agent.environment import TaskUser

OOM_MESSAGE = (
    "out of memory: the kernel killed this task's process. Raise the task's memory limit "
    "(resources.limits.memory); if it uses an engine with its own memory budget, such as "
    "DuckDB, set that budget too, because it sizes itself from detected RAM and may not "
    "see the container's limit."
)

EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REFUSED = 4
EXIT_SETUP_FAILED = 5
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

# After the command exits, how long its pipes may stay open (held by a process it
# left behind) before the rest of its process group is killed.
REASON_LIMIT = 1000
_REASONS = itertools.count(1)


def secret_env_name(name: str) -> str:
    """``LEOFLOW_SECRET_<NAME>``: ASCII letters upper-cased, digits kept, anything else ``_``."""
    return "LEOFLOW_SECRET_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else "_" for c in name
    )


def own_program(argv: list[str]) -> list[str]:
    """A command whose program is ``leoflow`` runs this agent's own Leoflow.

    Never a ``leoflow`` that the task's PATH finds first: whatever a DAG image
    installs (a dbt with another protobuf, say) cannot stand in for it.
    """
    if argv and argv[0] == "leoflow":
        return [sys.executable, "-m", "leoflow", *argv[1:]]
    return argv


def reason_path() -> str:
    return os.path.join(held_dirs.tmpdir(), f"leoflow-exit-reason-{os.getpid()}-{next(_REASONS)}")


def take_reason(path: str, mask: Callable[[str], str] = str) -> str:
    """What the command wrote to ``LEOFLOW_EXIT_REASON_FILE``, white space folded, at
    most 1000 chars. Only a regular file is read, never through a symbolic link: the
    agent may run as root while the command runs as a task user, who could otherwise
    have the first line of a file only root may read shown as its try's message.
    ``mask`` hides secrets before the text is folded and again after, and before it is
    cut short: a cut through a secret would leave a part no mask matches."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:  # the usual case: nothing was written, nothing to remove
        return ""
    except OSError:  # a symbolic link (ELOOP) or worse: removed below, not read
        text = ""
    else:
        with open(fd, "rb") as handle:
            regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
            # Enough bytes for REASON_LIMIT + 1 characters of any UTF-8.
            data = handle.read(4 * (REASON_LIMIT + 1)) if regular else b""
        text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(OSError):
        os.unlink(path)
    text = mask(" ".join(mask(text).split()))
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3] + "..."


def format_duration(seconds: float) -> str:
    """30m, 1h5m, 90s -> 1m30s, 1.5s: how a person writes a timeout."""
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:g}s"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def spawn_failure(exc: Exception, program: str, cwd: str, user: TaskUser | None) -> tuple[int, str]:
    """Exit code and sentence for a command that could not be started."""
    if isinstance(exc, ValueError):  # a NUL byte in the command or its environment
        return EXIT_SETUP_FAILED, f"cannot start {program!r}: {exc}"
    if isinstance(exc, subprocess.SubprocessError):
        return EXIT_SETUP_FAILED, f"cannot start {program!r}: {exc}"
    assert isinstance(exc, OSError)
    if isinstance(exc, FileNotFoundError) and cwd and not os.path.isdir(cwd):
        return EXIT_SETUP_FAILED, f"working directory {cwd!r} does not exist"
    if isinstance(exc, FileNotFoundError):
        return EXIT_NOT_FOUND, f"command not found: {program!r}"
    if user is not None and exc.errno == errno.EPERM:
        return EXIT_SETUP_FAILED, (
            f"cannot run {program!r} as task user {user.name!r} (uid {user.uid}): "
            f"{exc.strerror}; only an agent running as root can switch users"
        )
    if isinstance(exc, PermissionError):
        return EXIT_CANNOT_EXECUTE, f"cannot execute {program!r}: {exc.strerror}"
    return EXIT_CANNOT_EXECUTE, f"cannot start {program!r}: {exc}"


# What sh runs without looking for a program: its builtins and keywords.
_SHELL_WORDS = frozenset(
    [
        "!",
        "{",
        "}",
        "[",
        "[[",
        ".",
        ":",
        "alias",
        "bg",
        "break",
        "case",
        "cd",
        "command",
        "continue",
        "do",
        "done",
        "echo",
        "elif",
        "else",
        "esac",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fg",
        "fi",
        "for",
        "getopts",
        "hash",
        "if",
        "in",
        "jobs",
        "kill",
        "local",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "then",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "until",
        "wait",
        "while",
    ]
)
# The first word a shell string runs, past leading VAR=value assignments.
_FIRST_PROGRAM = re.compile(r"\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*([^\s;&|()<>'\"`$]+)")


def shell_not_found(argv: Sequence[str], path: str | None) -> str | None:
    """For a shell-string command (``/bin/sh -c ...``) that exited 127: the argv form's
    sentence, ``command not found: 'name'``, when its first program is not on ``path``;
    else a sentence saying that some command the script runs was not found. None for
    an argv command, whose 127 is its own."""
    if len(argv) != 3 or list(argv[:2]) != ["/bin/sh", "-c"]:
        return None
    found = _FIRST_PROGRAM.match(argv[2])
    name = found.group(1) if found else ""
    if name and name not in _SHELL_WORDS and shutil.which(name, path=path or os.defpath) is None:
        return f"command not found: {name!r}"
    return "exited with code 127: a command the shell script runs was not found"


def exit_description(exit_code: int, signum: int) -> str:
    if signum:
        return f"killed by signal {signal_name(signum)}"
    return f"exited with code {exit_code}" if exit_code else ""


def exit_message(
    exit_code: int, signum: int, reason: str, forwarded: int | None, not_found: str | None = None
) -> str:
    """How a command that ran to its end ended: the reason it gave, then the exit (or
    ``not_found``, a shell's 127 told as the argv form tells it); and whether it was
    stopped by a signal the agent passed on."""
    message = not_found or exit_description(exit_code, signum)
    if reason and exit_code:
        message = f"{reason} ({message})"
    if forwarded is not None:
        message = f"the agent received {signal_name(forwarded)} and forwarded it; " + (
            message or "the command exited with code 0"
        )
    return message


def warn(message: str) -> None:
    print(f"leoflow agent: {message}", file=sys.stderr, flush=True)
