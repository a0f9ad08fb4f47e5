"""``leoflow lite``: schedule a folder of DAGs on this host until stopped."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from leoflow.commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    configure_logging,
    run_async,
    settings_of,
)


def cmd_lite(args: argparse.Namespace) -> int:
    from leoflow.runtime.lease import StartupError
    from leoflow.runtime.lite import serve

    settings = settings_of(args)
    configure_logging("INFO" if args.verbose else "WARNING", settings.log_format)
    folder = Path(args.dags or settings.dags_folder or "dags")
    executor = args.executor or settings.executor
    try:
        run_async(serve(settings, folder, executor_name=executor, api=not args.no_api))
    except StartupError as exc:
        print(f"leoflow lite: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def add_parser(sub: Any) -> None:
    lite = sub.add_parser("lite", help="schedule a folder of DAGs on this host until stopped")
    lite.add_argument("--dags", help="DAG folder (default: LEOFLOW_DAGS_FOLDER or ./dags)")
    lite.add_argument("--executor", choices=["agent", "subprocess", "docker"])
    lite.add_argument("--no-api", action="store_true", help="do not serve the HTTP API")
    lite.add_argument("-v", "--verbose", action="store_true")
    lite.set_defaults(func=cmd_lite)
