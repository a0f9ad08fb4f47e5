"""``leoflow run DAG``: one run, to completion, in this process; the exit code says how
it ended (0 success, 1 failed, 128+N stopped by signal N).

The run path imports what it uses in the order it needs it: the settings, then
the agent is started (``runtime.early_agent``), and only then the DAG loader,
SQLAlchemy and the scheduler, whose import overlaps the agent's start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leoflow.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    load_target,
    run_async,
    settings_of,
    to_stderr,
)

if TYPE_CHECKING:
    from leoflow.domain.execution import Executor
    from leoflow.settings import Settings


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    executor = args.executor or settings.executor
    conf = json.loads(args.conf) if args.conf else None
    return run_async(_run_once(settings, args, executor, conf))


async def _run_once(settings: Settings, args: argparse.Namespace, executor: str, conf: Any) -> int:
    """The same path for every executor: only where the tasks run differs."""
    from leoflow.runtime.early_agent import early_agent

    stop = asyncio.Event()
    signals: list[int] = []

    def on_signal(signum: int) -> None:
        signals.append(signum)
        stop.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    if executor == "docker":
        from leoflow.runtime.engine import engine_problem

        problem = await engine_problem(settings)
        if problem is not None:  # at once, before the DAG loads or the store opens
            print(f"leoflow run: {problem}", file=sys.stderr)
            return EXIT_USAGE
    async with early_agent(settings, executor) as (settings, agent):
        return await _load_and_run(settings, args, executor, conf, agent, stop, signals)


async def _load_and_run(
    settings: Settings,
    args: argparse.Namespace,
    executor: str,
    conf: Any,
    agent: Executor | None,
    stop: asyncio.Event,
    signals: list[int],
) -> int:
    from leoflow.agent.startup_gc import settled
    from leoflow.commands.console import Progress, final_table
    from leoflow.dagfile.loader import load_options
    from leoflow.dagfile.problems import DagFileError
    from leoflow.dbt.project import expander
    from leoflow.domain.dbt_run_select import RunSelectionError
    from leoflow.domain.progress import topological_order
    from leoflow.domain.states import RUN_TERMINAL, RunState
    from leoflow.runtime.dagfolder import announce_ignored
    from leoflow.runtime.lite import STOPPED_MESSAGE, describe_killed, run_dag
    from leoflow.runtime.parts import IMAGE_EXECUTORS
    from leoflow.secrets import DirectorySecrets

    settled()  # the run's imports are done (see agent.startup_gc)
    secrets = DirectorySecrets(settings.resolved_secrets_dir)
    in_pods = executor in IMAGE_EXECUTORS
    options = load_options(
        executor,
        settings.task_pod_passthrough,
        dbt=expander(settings.home / "dbt-cache", in_pods=in_pods, progress=to_stderr),
        known_secrets=secrets.names(),
        secrets_where=secrets.describe(),
    )
    loaded = load_target(args.target, Path(args.dags) if args.dags else None, options)
    if loaded is None:
        return EXIT_FAILED
    if executor not in IMAGE_EXECUTORS:  # the translation says what a container ignores
        announce_ignored(loaded.spec, lambda m: print(m, file=sys.stderr))
    # --json: stdout is the one document at the end; the progress goes to stderr.
    progress = Progress(sys.stderr if args.json else sys.stdout)
    order = topological_order(loaded.spec)  # all the final table needs of the spec
    handoff = [loaded]
    del loaded  # run_dag drops the loader's copy once it is stored: hold no other
    try:
        row, runtime = await run_dag(
            settings,
            handoff.pop(),
            executor_name=executor,
            conf=conf,
            watch=lambda rt: rt.observe(progress),
            stop=stop,
            executor=agent,
        )
    except (DagFileError, RunSelectionError) as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILED
    try:
        await progress.stop()
        tis = await runtime.store.list_task_instances(run_pk=row.pk)
    finally:
        await runtime.close()
    if args.json:
        from leoflow.commands.http import print_json
        from leoflow.commands.json_out import run_document

        print_json(run_document(row, tis, order))
    else:
        print()
        print(final_table(tis, order))
        print(f"\nrun {row.run_id} of {row.dag_id}: {row.state.value}")
    if row.message == STOPPED_MESSAGE or (signals and row.state not in RUN_TERMINAL):
        print(
            f"leoflow run: stopped; {describe_killed(runtime.scheduler.interrupted)}; "
            f"run {row.run_id} marked failed (a new leoflow run starts afresh)",
            file=sys.stderr,
        )
        return 128 + signals[0]
    return EXIT_OK if row.state is RunState.SUCCESS else EXIT_FAILED


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run one DAG once, to completion, in this process")
    run.add_argument("target", help="a DAG file, or a dag_id found in --dags")
    run.add_argument("--dags", help="folder to look the dag_id up in (default ./dags)")
    run.add_argument("--executor", choices=["agent", "subprocess", "kubernetes", "docker"])
    run.add_argument("--conf", help="JSON object passed to the run")
    run.add_argument(
        "--json", action="store_true", help="print the run and its tasks as JSON (see README)"
    )
    run.set_defaults(func=cmd_run, settles_gc=True)
