"""Pool mode: Lite's agent runs many tasks at once, each from a JSON line on its stdin,
and tells Lite of each task's start and end in JSON lines on its stdout (``--events``).

The protocol itself is in ``leoflow.agent.cli``'s docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
from typing import Any

from leoflow.agent.task import Supervisor, TaskRun, warn
from leoflow.agent.warden import Warden

_flush_due = False
_reader_gone = False


def emit(fields: dict[str, Any]) -> None:
    """One event line to the pool's reader. Lines written in one turn of the loop go
    out in one write at its end: a write per line woke the reader (Lite's loop) for
    each, two a task. The events only keep Lite's list of process groups for the case
    that we die, and then the warden kills those groups anyway."""
    global _flush_due
    if _reader_gone:
        return
    try:
        sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    except BrokenPipeError:
        _lost_reader()
        return
    if _flush_due:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _flush()
        return
    _flush_due = True
    loop.call_soon(_flush)


def _flush() -> None:
    global _flush_due
    _flush_due = False
    if _reader_gone:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _lost_reader()


def _lost_reader() -> None:
    """Lite died (its end of our stdout is closed): the events have no reader left.
    What is still buffered goes nowhere, at exit too, instead of a traceback."""
    global _reader_gone
    _reader_gone = True
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _die_with_parent() -> int | None:
    """Lite's pool agent must not outlive the scheduler that feeds it tickets: a
    scheduler killed with SIGKILL cannot stop it, so ask the kernel to send us
    SIGTERM (forwarded to every running command) when our parent dies. Returns the
    parent's pid when the request took."""
    parent = os.environ.get("LEOFLOW_AGENT_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return None
    import ctypes

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        return None
    if os.getppid() != int(parent):  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
    return int(parent)


async def run_pool(sup: Supervisor) -> int:
    """Pool mode (``leoflow.agent.cli``'s docstring has its stdin protocol): a task for
    each ``run`` line, until stdin closes and the last of them has ended."""
    sup.parent_pid = _die_with_parent()
    # Many commands: one warden for all of them is cheaper than an exec each (``warden``).
    sup.warden = Warden.start()
    runs: dict[str, TaskRun] = {}
    tasks: set[asyncio.Task[int]] = set()

    def refuse(key: Any, message: str) -> None:
        warn(message)
        sup.event(event="error", key=key if isinstance(key, str) else None, message=message)

    def start(key: str, ticket: str) -> None:
        run = runs[key] = TaskRun(sup, ticket, key=key)

        async def go() -> int:
            failed = ""
            try:
                code = await run.run()
            except Exception as exc:  # one task's bug must not take the others down
                warn(f"task {key}: agent error: {exc!r}")
                code, failed = 1, f"agent error: {type(exc).__name__}: {exc}"
            finally:
                runs.pop(key, None)
            if run.token == "" or failed:  # never reported: the executor reports it
                sup.event(
                    event="finished", key=key, exit_code=code, message=failed or "not started"
                )
            return code

        task = asyncio.create_task(go())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        lineno = 0
        async for line in _stdin_lines():
            lineno += 1
            if not line.strip():
                continue
            try:
                op = json.loads(line)
            except ValueError:
                refuse(None, f"stdin line {lineno}: not JSON")
                continue
            if not isinstance(op, dict):
                refuse(None, f"stdin line {lineno}: not a JSON object")
                continue
            if op.get("op") == "dial":  # Lite's endpoint is up: connect ahead of the work
                sup.channel.connect_ahead()
                continue
            key = op.get("key")
            if not isinstance(key, str) or not key:
                refuse(None, f"stdin line {lineno}: no key")
            elif sup.received_signal is not None:
                refuse(key, f"task {key}: refused: the agent is shutting down")
            elif op.get("op") == "run":
                ticket = op.get("ticket")
                if not isinstance(ticket, str) or not ticket:
                    refuse(key, f"task {key}: run without a ticket")
                elif key in runs:
                    refuse(key, f"task {key}: already running")
                else:
                    start(key, ticket)
            elif op.get("op") == "cancel":
                reason = op.get("reason")
                if key in runs:
                    runs[key].cancel(
                        reason
                        if isinstance(reason, str) and reason
                        else "cancelled by the executor"
                    )
                else:
                    refuse(key, f"task {key}: cancel for a task that is not running")
            else:
                refuse(key, f"stdin line {lineno}: unknown op {op.get('op')!r}")
        while tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await sup.heartbeats.close()
        await sup.channel.close()
        if sup.warden is not None:
            sup.warden.close()
        if sup.orphaned:
            _remove_socket_dir(os.environ.get("LEOFLOW_AGENT_SOCKET_DIR", ""))
    return 128 + sup.received_signal if sup.received_signal is not None else 0


def _remove_socket_dir(path: str) -> None:
    """The directory of the dead Lite's endpoint socket: nobody else is left to remove
    it. Sockets only, then the directory if that left it empty: anything else in it is
    not ours to delete."""
    if not path:
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                os.unlink(entry.path)
        os.rmdir(path)


async def _stdin_lines() -> Any:
    """Lines of stdin as they come, without blocking the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1024 * 1024)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    except (ValueError, OSError):  # a regular file: read it in a thread
        while line := await asyncio.to_thread(sys.stdin.buffer.readline):
            yield line.decode("utf-8", "replace")
        return
    while line_bytes := await reader.readline():
        yield line_bytes.decode("utf-8", "replace")
