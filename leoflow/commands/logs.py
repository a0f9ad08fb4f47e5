"""``leoflow logs DAG RUN TASK``: a try's output, from the database here or, with
``--server`` (or LEOFLOW_SERVER), through the API."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from leoflow.commands.common import EXIT_FAILED, EXIT_OK, run_async, settings_of
from leoflow.commands.http import (
    ApiError,
    add_remote_options,
    api_command,
    call,
    client,
    detail,
    remote_requested,
    url,
)

if TYPE_CHECKING:
    from leoflow.settings import Settings

Writer = Callable[[bytes | None], None]


def cmd_logs(args: argparse.Namespace) -> int:
    if remote_requested(args):
        return remote_logs(args)
    return run_async(_local_logs(settings_of(args), args))


def log_writer(args: argparse.Namespace, try_number: int = 0) -> Writer:
    """Writes a task's log bytes to stdout; ``None`` ends the log.

    A file or a pipe gets the bytes exactly as stored. A terminal gets them with
    colours kept and every other control sequence shown escaped, so a task cannot
    drive the user's terminal (retitle it, write the clipboard) through its log;
    ``--raw`` opts out.
    """
    out = sys.stdout.buffer
    if getattr(args, "json", False):  # one document once the log (or, -f, the try) ends
        from leoflow.commands.http import print_json
        from leoflow.commands.json_out import log_document

        held = bytearray()

        def document(data: bytes | None) -> None:
            if data is not None:
                held.extend(data)
            else:
                ids = (args.dag_id, args.run_id, args.task_id)
                print_json(log_document(*ids, try_number, bytes(held)))

        return document
    if getattr(args, "raw", False) or not sys.stdout.isatty():

        def raw(data: bytes | None) -> None:
            if data:
                out.write(data)
                out.flush()

        return raw
    from leoflow.domain.printable import TerminalLog

    terminal = TerminalLog()

    def escaped(data: bytes | None) -> None:
        out.write(terminal.end() if data is None else terminal.feed(data))
        out.flush()

    return escaped


async def _local_logs(settings: Settings, args: argparse.Namespace) -> int:
    from leoflow.domain.states import TASK_TERMINAL
    from leoflow.store import Store

    store = await Store.open(settings.resolved_database_url)
    try:
        run = await store.find_run(args.dag_id, args.run_id)
        if run is None:
            print(f"leoflow: no run {args.run_id!r} of DAG {args.dag_id!r}", file=sys.stderr)
            return EXIT_FAILED
        tis = [
            t for t in await store.list_task_instances(run_pk=run.pk) if t.task_id == args.task_id
        ]
        if not tis:
            print(f"leoflow: run {args.run_id} has no task {args.task_id!r}", file=sys.stderr)
            return EXIT_FAILED
        ti = tis[0]
        try_number = args.try_number or ti.try_number
        if try_number < 1:
            print(
                f"leoflow: task {args.task_id} has not run yet ({ti.state.value})", file=sys.stderr
            )
            return EXIT_FAILED
        offset = 0
        write = log_writer(args, try_number)
        while True:
            data = await store.read_log(ti.pk, try_number, offset=offset)
            if data:
                write(data)
                offset += len(data)
            if not args.follow:
                write(None)
                return EXIT_OK
            current = await store.get_task_instance(ti.pk)
            if (
                current is None
                or current.state in TASK_TERMINAL
                or current.try_number != try_number
            ):
                write(await store.read_log(ti.pk, try_number, offset=offset))
                write(None)
                return EXIT_OK
            await asyncio.sleep(0.5)
    finally:
        await store.close()


@api_command
def remote_logs(args: argparse.Namespace) -> int:
    """``leoflow logs DAG RUN TASK [--try N] [-f] --server URL``: print a try's log."""
    import httpx

    base = f"/api/v1/dags/{url(args.dag_id)}/runs/{url(args.run_id)}/tasks/{url(args.task_id)}"
    with client(args) as session:
        try_number = getattr(args, "try_number", None)
        if not try_number:
            ti = call(session, "GET", base).json()
            try_number = ti["try_number"]
            if try_number < 1:
                raise ApiError(f"task {args.task_id} has not run yet ({ti['state']})")
        params = {"follow": "true"} if getattr(args, "follow", False) else {}
        try:
            with session.stream(
                "GET", f"{base}/logs/{try_number}", params=params, timeout=None
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise ApiError(f"{response.status_code}: {detail(response)}")
                write = log_writer(args, try_number)
                for chunk in response.iter_bytes():
                    write(chunk)
                write(None)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the API at {session.base_url}: {exc}") from exc
    return EXIT_OK


def add_parser(sub: Any) -> None:
    logs = sub.add_parser("logs", help="print a task's output")
    logs.add_argument("dag_id")
    logs.add_argument("run_id")
    logs.add_argument("task_id")
    logs.add_argument("--try", dest="try_number", type=int, help="which try (default: the latest)")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the try ends"
    )
    logs.add_argument(
        "--raw",
        action="store_true",
        help="on a terminal too, print the log's bytes unchanged (default: escape control "
        "sequences other than colours)",
    )
    add_remote_options(logs, local=True)
    logs.set_defaults(func=cmd_logs)
