"""Pro's two processes: ``leoflow scheduler`` and ``leoflow api``."""

from __future__ import annotations

import argparse
from typing import Any

from leoflow.commands.common import configure_logging, run_async, settings_of


def cmd_scheduler(args: argparse.Namespace) -> int:
    from leoflow.runtime.pro import serve_scheduler

    settings = settings_of(args)
    configure_logging(settings.log_level, settings.log_format)
    return run_async(serve_scheduler(settings, executor_name=args.executor))


def cmd_api(args: argparse.Namespace) -> int:
    from leoflow.api.server import serve_api

    settings = settings_of(args)
    configure_logging(settings.log_level, settings.log_format)
    return serve_api(settings)


def add_parser(sub: Any) -> None:
    scheduler = sub.add_parser(
        "scheduler", help="Pro: the scheduler (leader election, executor, agent endpoint)"
    )
    scheduler.add_argument("--executor", choices=["kubernetes", "agent", "subprocess"])
    scheduler.set_defaults(func=cmd_scheduler)
    api = sub.add_parser("api", help="Pro: the HTTP API (talks only to the database)")
    api.set_defaults(func=cmd_api)
