"""The ``leoflow`` command.

Each subcommand imports only what it needs: ``leoflow run`` never pays for
kubernetes_asyncio or FastAPI, and ``leoflow agent`` imports almost nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _settings(args: argparse.Namespace, **overrides: Any) -> Any:
    from leoflow.settings import SettingsError, load_settings

    try:
        return load_settings(getattr(args, "config", None), **overrides)
    except SettingsError as exc:
        print(f"leoflow: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from exc


def _asyncio_run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.run(coro)
    return uvloop.run(coro)


def _configure_logging(level: str = "WARNING", fmt: str = "text") -> None:
    import logging

    if fmt == "json":
        from leoflow.logs import JsonFormatter

        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level, handlers=[handler])
    else:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# ----------------------------------------------------------------- dags validate


def cmd_dags_validate(args: argparse.Namespace) -> int:
    from leoflow.dagfile.loader import LoadOptions, load_dag_folder

    passthrough = None
    if args.passthrough is not None:
        passthrough = {p.strip() for p in args.passthrough.split(",") if p.strip()}
    pools = None if args.pools is None else {p.strip() for p in args.pools.split(",") if p.strip()}
    from leoflow.dbt.project import expander

    result = load_dag_folder(
        Path(args.path),
        LoadOptions(known_pools=pools, passthrough=passthrough, dbt=expander()),
    )
    for error in result.errors:
        print(error, file=sys.stderr)
    from leoflow.domain.printable import printable

    for dag_id, loaded in sorted(result.dags.items()):
        print(printable(f"ok  {dag_id}  ({len(loaded.spec.tasks)} tasks)  {loaded.path}"))
        _note_catchup(args, loaded.spec)
    if result.errors:
        problems = sum(len(e.problems) for e in result.errors)
        print(
            f"{len(result.errors)} file(s) with {problems} problem(s); "
            f"{len(result.dags)} DAG(s) valid",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not result.dags:
        print(f"no DAG files (*.yaml, *.yml) under {args.path}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _note_catchup(args: argparse.Namespace, spec: Any) -> None:
    """Say before it happens when catchup will be held back by max_catchup_runs."""
    if not (spec.catchup and spec.schedule and spec.start_date is not None):
        return
    import time

    from leoflow.domain.schedule import due_runs

    cap = int(_settings(args).max_catchup_runs)
    now = time.time()
    if len(due_runs(spec, None, now, now, limit=cap + 1)) > cap:
        print(
            f"note: {spec.dag_id} catches up from {spec.start_date.isoformat()}: more than "
            f"{cap} runs are due now; the scheduler keeps {cap} queued at a time and creates "
            "the rest as those start (max_catchup_runs, LEOFLOW_MAX_CATCHUP_RUNS)",
            file=sys.stderr,
        )


# -------------------------------------------------------------------- dags next


def cmd_dags_next(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from leoflow.dagfile.loader import DagFileError, LoadOptions
    from leoflow.domain.schedule import next_fires
    from leoflow.lite import resolve_target

    if not 1 <= args.n <= 1000:
        print("leoflow: -n must be between 1 and 1000", file=sys.stderr)
        return EXIT_USAGE
    try:
        after = datetime.fromisoformat(args.after) if args.after else datetime.now(UTC)
    except ValueError:
        print(f"leoflow: --after {args.after!r} is not an ISO 8601 time", file=sys.stderr)
        return EXIT_USAGE
    after = after if after.tzinfo is not None else after.replace(tzinfo=UTC)
    dags_dir = Path(args.dags) if args.dags else None
    if dags_dir is None and not Path(args.target).suffix:
        dags_dir = _settings(args).dags_folder
    try:
        loaded = resolve_target(args.target, dags_dir, LoadOptions())
    except DagFileError as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    except LookupError as exc:
        print(f"leoflow: {exc.args[0]}", file=sys.stderr)
        return EXIT_FAILED
    spec = loaded.spec
    if spec.schedule is None:
        print(f"DAG {spec.dag_id} has no schedule: it runs only when triggered", file=sys.stderr)
        return EXIT_FAILED
    zone = ZoneInfo(spec.timezone)
    print(f"{spec.dag_id}: {spec.schedule!r} in {spec.timezone}")
    fires = next_fires(spec, after, args.n)
    for fire in fires:
        local = fire.astimezone(zone)
        zone_name = f"{local:%Z}"
        print(f"{local:%Y-%m-%d %H:%M %a} {zone_name:<5} ({local:%z})   {fire:%Y-%m-%d %H:%M} UTC")
    if len(fires) < args.n:
        print(f"(no further fire times in the next years: {len(fires)} of {args.n})")
    return EXIT_OK


# ------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from leoflow.dagfile.loader import DagFileError, LoadOptions
    from leoflow.lite import resolve_target

    settings = _settings(args)
    executor = args.executor or settings.executor
    conf = json.loads(args.conf) if args.conf else None
    from leoflow.dbt.project import expander

    options = LoadOptions(
        passthrough=settings.task_pod_passthrough if executor == "kubernetes" else None,
        dbt=expander(settings.home / "dbt-cache"),
    )
    try:
        loaded = resolve_target(args.target, Path(args.dags) if args.dags else None, options)
    except DagFileError as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    except LookupError as exc:
        print(f"leoflow: {exc.args[0]}", file=sys.stderr)
        return EXIT_FAILED
    return int(_asyncio_run(_run_once(settings, loaded, executor, conf)))


async def _run_once(settings: Any, loaded: Any, executor: str, conf: Any) -> int:
    """The same path for every executor: only where the tasks run differs."""
    from leoflow.console import Progress, final_table
    from leoflow.dagfile.loader import DagFileError
    from leoflow.domain.progress import topological_order
    from leoflow.domain.states import RUN_TERMINAL, RunState
    from leoflow.lite import STOPPED_MESSAGE, announce_ignored, describe_killed, run_dag

    if executor != "kubernetes":
        announce_ignored(loaded.spec, lambda m: print(m, file=sys.stderr))
    progress = Progress()
    stop = asyncio.Event()
    signals: list[int] = []

    def on_signal(signum: int) -> None:
        signals.append(signum)
        stop.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        row, runtime = await run_dag(
            settings, loaded, executor_name=executor, conf=conf, watch=progress.attach, stop=stop
        )
    except DagFileError as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    try:
        await progress.stop()
        tis = await runtime.store.list_task_instances(run_pk=row.pk)
    finally:
        await runtime.close()
    print()
    print(final_table(tis, topological_order(loaded.spec)))
    print(f"\nrun {row.run_id} of {row.dag_id}: {row.state.value}")
    if row.message == STOPPED_MESSAGE or (signals and row.state not in RUN_TERMINAL):
        print(
            f"leoflow run: stopped; {describe_killed(runtime.scheduler.interrupted)}; "
            f"run {row.run_id} marked failed (a new leoflow run starts afresh)",
            file=sys.stderr,
        )
        return 128 + signals[0]
    return EXIT_OK if row.state is RunState.SUCCESS else EXIT_FAILED


# ------------------------------------------------------------------------ lite


def cmd_lite(args: argparse.Namespace) -> int:
    from leoflow.lite import StartupError, serve

    settings = _settings(args)
    _configure_logging("INFO" if args.verbose else "WARNING", settings.log_format)
    folder = Path(args.dags or settings.dags_folder or "dags")
    try:
        _asyncio_run(
            serve(
                settings,
                folder,
                executor_name=args.executor or settings.executor,
                api=not args.no_api,
            )
        )
    except StartupError as exc:
        print(f"leoflow lite: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


# -------------------------------------------------------------------------- db


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from leoflow.store import Store

    settings = _settings(args)
    settings.home.mkdir(parents=True, exist_ok=True)

    async def upgrade() -> None:
        store = await Store.open(settings.resolved_database_url, migrate=True)
        await store.close()

    _asyncio_run(upgrade())
    print(f"database at head: {settings.resolved_database_url}")
    return EXIT_OK


def cmd_db_prune(args: argparse.Namespace) -> int:
    from leoflow.domain.durations import parse_duration

    try:
        older_than = parse_duration(args.older_than)
    except ValueError as exc:
        print(f"leoflow db prune: --older-than: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.batch_size < 1:
        print("leoflow db prune: --batch-size: expected an integer >= 1", file=sys.stderr)
        return EXIT_USAGE
    settings = _settings(args)

    async def prune() -> Any:
        from leoflow.store import Store
        from leoflow.store.retention import prune as prune_store

        store = await Store.open(settings.resolved_database_url, migrate=False)
        try:
            return await prune_store(
                store,
                older_than=older_than,
                dag_id=args.dag,
                dry_run=args.dry_run,
                batch=args.batch_size,
            )
        finally:
            await store.close()

    counts = _asyncio_run(prune())
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {counts.summary()}")
    return EXIT_OK


# ------------------------------------------------------------------------ logs


def cmd_logs(args: argparse.Namespace) -> int:
    if args.server or os.environ.get("LEOFLOW_SERVER"):
        from leoflow.remote_cli import remote_logs

        return remote_logs(args)
    settings = _settings(args)
    return int(_asyncio_run(_logs(settings, args)))


def log_writer(args: argparse.Namespace) -> Any:
    """Writes a task's log bytes to stdout; ``None`` ends the log.

    A file or a pipe gets the bytes exactly as stored. A terminal gets them with
    colours kept and every other control sequence shown escaped, so a task cannot
    drive the user's terminal (retitle it, write the clipboard) through its log;
    ``--raw`` opts out.
    """
    out = sys.stdout.buffer
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


async def _logs(settings: Any, args: argparse.Namespace) -> int:
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
        write = log_writer(args)
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


# ------------------------------------------------------------------ pro roles


def cmd_scheduler(args: argparse.Namespace) -> int:
    from leoflow.pro import serve_scheduler

    settings = _settings(args)
    _configure_logging(settings.log_level, settings.log_format)
    return int(_asyncio_run(serve_scheduler(settings, executor_name=args.executor)))


def cmd_api(args: argparse.Namespace) -> int:
    from leoflow.api.server import serve_api

    settings = _settings(args)
    _configure_logging(settings.log_level, settings.log_format)
    return serve_api(settings)


# ----------------------------------------------------------------------- agent


def cmd_agent(argv: Sequence[str]) -> int:
    from leoflow.agent import main as agent_main

    return int(agent_main(list(argv)))


# -------------------------------------------------------------------- argparse


def build_parser() -> argparse.ArgumentParser:
    from leoflow.remote_cli import add_remote_commands, add_remote_options

    parser = argparse.ArgumentParser(
        prog="leoflow", description="Leoflow: DAGs of tasks, each run as its own process or pod."
    )
    parser.add_argument("--config", type=Path, help="settings file (YAML); LEOFLOW_* env wins")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dags = sub.add_parser("dags", help="work with DAG files").add_subparsers(
        dest="dags_command", required=True, metavar="SUBCOMMAND"
    )
    validate = dags.add_parser("validate", help="check DAG files; exit 1 listing every problem")
    validate.add_argument("path", help="a DAG file or a folder of them")
    validate.add_argument(
        "--passthrough", help="comma-separated execution fields the operator allows (Kubernetes)"
    )
    validate.add_argument("--pools", help="comma-separated pool names that exist")
    validate.set_defaults(func=cmd_dags_validate)
    nxt = dags.add_parser("next", help="print a DAG's next fire times, local and UTC")
    nxt.add_argument("target", help="a DAG file, or a dag_id found in --dags")
    nxt.add_argument(
        "--dags", help="folder to look the dag_id up in (default: dags_folder or ./dags)"
    )
    nxt.add_argument("-n", type=int, default=5, help="how many fire times (default 5)")
    nxt.add_argument("--after", help="ISO 8601 time to count from (default now; naive is UTC)")
    nxt.set_defaults(func=cmd_dags_next)

    run = sub.add_parser("run", help="run one DAG once, to completion, in this process")
    run.add_argument("target", help="a DAG file, or a dag_id found in --dags")
    run.add_argument("--dags", help="folder to look the dag_id up in (default ./dags)")
    run.add_argument("--executor", choices=["agent", "subprocess", "kubernetes"])
    run.add_argument("--conf", help="JSON object passed to the run")
    run.set_defaults(func=cmd_run)

    lite = sub.add_parser("lite", help="schedule a folder of DAGs on this host until stopped")
    lite.add_argument("--dags", help="DAG folder (default: LEOFLOW_DAGS_FOLDER or ./dags)")
    lite.add_argument("--executor", choices=["agent", "subprocess"])
    lite.add_argument("--no-api", action="store_true", help="do not serve the HTTP API")
    lite.add_argument("-v", "--verbose", action="store_true")
    lite.set_defaults(func=cmd_lite)

    db = sub.add_parser("db", help="database maintenance").add_subparsers(
        dest="db_command", required=True, metavar="SUBCOMMAND"
    )
    db.add_parser("upgrade", help="apply schema migrations").set_defaults(func=cmd_db_upgrade)
    prune = db.add_parser(
        "prune", help="delete finished runs older than a duration, and expired tickets"
    )
    prune.add_argument(
        "--older-than", required=True, help="runs that ended longer ago than this (e.g. 30d)"
    )
    prune.add_argument("--dag", help="only this DAG's runs")
    prune.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing")
    prune.add_argument(
        "--batch-size", type=int, default=200, help="runs per transaction (default 200)"
    )
    prune.set_defaults(func=cmd_db_prune)

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
    add_remote_options(logs)
    logs.set_defaults(func=cmd_logs)

    add_remote_commands(sub, dags)
    from leoflow.backfill_cli import add_backfill_command

    add_backfill_command(sub)

    scheduler = sub.add_parser(
        "scheduler", help="Pro: the scheduler (leader election, executor, agent endpoint)"
    )
    scheduler.add_argument("--executor", choices=["kubernetes", "agent", "subprocess"])
    scheduler.set_defaults(func=cmd_scheduler)

    api = sub.add_parser("api", help="Pro: the HTTP API (talks only to the database)")
    api.set_defaults(func=cmd_api)

    sub.add_parser("agent", help="the task agent (runs inside task pods and Lite)", add_help=False)
    sub.add_parser("dbt-task", help="run one dbt node as a task (a dbt task's command)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["agent"]:
        return cmd_agent(argv[1:])
    if argv[:1] == ["dbt-task"]:
        from leoflow.dbt.task import run as dbt_task

        return dbt_task(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command cut off by `head`


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
