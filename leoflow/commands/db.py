"""``leoflow db upgrade`` (apply migrations) and ``db prune`` (retention)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from leoflow.commands.common import EXIT_OK, EXIT_USAGE, run_async, settings_of

if TYPE_CHECKING:
    from leoflow.store.retention import PruneCounts


def cmd_upgrade(args: argparse.Namespace) -> int:
    from leoflow.store import Store

    settings = settings_of(args)
    settings.home.mkdir(parents=True, exist_ok=True)

    async def upgrade() -> None:
        store = await Store.open(settings.resolved_database_url, migrate=True)
        await store.close()

    run_async(upgrade())
    print(f"database at head: {settings.resolved_database_url}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from leoflow.domain.durations import parse_duration

    try:
        older_than = parse_duration(args.older_than)
    except ValueError as exc:
        print(f"leoflow db prune: --older-than: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.batch_size < 1:
        print("leoflow db prune: --batch-size: expected an integer >= 1", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_of(args)

    async def prune() -> PruneCounts:
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

    counts = run_async(prune())
    if args.json:
        from leoflow.commands.http import print_json

        print_json(
            {
                "dry_run": args.dry_run,
                "older_than_seconds": older_than,
                "dag_id": args.dag,
                "runs": counts.runs,
                "task_instances": counts.task_instances,
                "log_chunks": counts.log_chunks,
                "tickets": counts.tickets + counts.expired_tickets,
            }
        )
        return EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {counts.summary()}")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    db = sub.add_parser("db", help="database maintenance").add_subparsers(
        dest="db_command", required=True, metavar="SUBCOMMAND"
    )
    db.add_parser("upgrade", help="apply schema migrations").set_defaults(func=cmd_upgrade)
    prune = db.add_parser(
        "prune", help="delete finished runs older than a duration, and expired tickets"
    )
    prune.add_argument(
        "--older-than", required=True, help="runs that ended longer ago than this (e.g. 30d)"
    )
    prune.add_argument("--dag", help="only this DAG's runs")
    prune.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing")
    prune.add_argument("--json", action="store_true", help="print the counts as JSON")
    prune.add_argument(
        "--batch-size", type=int, default=200, help="runs per transaction (default 200)"
    )
    prune.set_defaults(func=cmd_prune)
