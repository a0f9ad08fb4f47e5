"""The ``leoflow`` command: the parser, assembled from one module per command group.

Each subcommand imports only what it needs when it runs: ``leoflow run`` never
pays for kubernetes_asyncio or FastAPI, and ``leoflow agent`` and ``leoflow
dbt-task`` skip even the parser.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# Commands that serve connections or run many tasks: their descriptor limit is raised.
LONG_RUNNING = frozenset({"lite", "run", "scheduler", "api"})
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command cut off by `head`
EXIT_USAGE = 2
# What `pip install leoflow` leaves out (the `pro` extra): Pro's Kubernetes client and
# PostgreSQL's driver. Lite never imports them; a command that needs one says how to get it.
PRO_PACKAGES = {"kubernetes_asyncio": "Kubernetes", "asyncpg": "PostgreSQL"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; for ``command`` "run" only that command's part: a ``leoflow run``
    (the one command whose start-up is its cost) builds and imports none of the others."""
    parser = argparse.ArgumentParser(
        prog="leoflow", description="Leoflow: DAGs of tasks, each run as its own process or pod."
    )
    parser.add_argument("--config", type=Path, help="settings file (YAML); LEOFLOW_* env wins")
    parser.add_argument("--version", action="version", version=f"leoflow {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command == "run":
        from leoflow.commands import run

        run.add_parser(sub)
        return parser
    # Here, not at the top: `leoflow agent` (a task pod's entry) must not pay for them.
    from leoflow.commands import (
        assets,
        backfill,
        dags,
        db,
        lite,
        logs,
        pools,
        roles,
        run,
        runs,
        tasks,
    )

    for group in (dags, run, lite, db, logs, runs, tasks, pools, roles, assets):
        group.add_parser(sub)
    backfill.add_backfill_command(sub)
    sub.add_parser("agent", help="the task agent (runs inside task pods and Lite)", add_help=False)
    sub.add_parser("dbt-task", help="run one dbt node as a task (a dbt task's command)")
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("leoflow")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def command_word(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (past ``--config FILE``); None before any other option."""
    args = iter(argv)
    for arg in args:
        if arg == "--config":
            next(args, None)
        elif not arg.startswith("--config="):
            return None if arg.startswith("-") else arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The ``leoflow`` command; called without ``argv`` it is the process's entry point,
    and a command that returns ends the process without the interpreter's teardown."""
    if argv is None:
        from leoflow.agent import quick_exit, startup_gc

        quick_exit.arm()
        startup_gc.pause()
        if command_word(sys.argv[1:]) == "run":
            # Nothing scrapes a `leoflow run` process (see scheduler.instruments); only
            # the process entry says so, so an in-process caller keeps its metrics.
            from leoflow.scheduler.instruments import serve_none

            serve_none()
        try:
            return quick_exit.returned(_main(sys.argv[1:]))
        finally:
            startup_gc.settled()
    return _main(list(argv))


def _main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        from leoflow.agent import main as agent_main

        return int(agent_main(argv[1:]))
    if argv[:1] == ["dbt-task"]:
        from leoflow.agent.startup_gc import settled
        from leoflow.dbt.task import run as dbt_task

        settled()
        return dbt_task(argv[1:])
    word = command_word(argv)
    args = build_parser(word).parse_args(argv)
    if word in LONG_RUNNING:
        from leoflow.agent.nofile import raise_open_files_limit

        raise_open_files_limit()
    if not getattr(args, "settles_gc", False):  # `leoflow run` does, after its imports
        from leoflow.agent.startup_gc import settled

        settled()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except ModuleNotFoundError as exc:
        if exc.name not in PRO_PACKAGES:
            raise
        print(
            f"leoflow: this needs {PRO_PACKAGES[exc.name]} support ({exc.name}), which Lite's "
            "install leaves out: pip install 'leoflow[pro]'",
            file=sys.stderr,
        )
        return EXIT_USAGE


def _reader_went_away() -> int:
    """Stdout's reader closed it (``leoflow logs … | head``): stop quietly.

    Whatever is still buffered for the closed pipe would raise again when Python
    flushes at exit, so stdout is pointed at /dev/null first.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    raise SystemExit(main())
