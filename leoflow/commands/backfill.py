"""``leoflow backfill``: runs of a DAG over a past range, through the API.

    leoflow backfill DAG --from 2026-01-01 --to 2026-01-31 [--reprocess-failed]
                         [--max-active-runs N] [--dry-run] [--no-wait]
    leoflow backfill --status ID | --cancel ID

The scheduler (Lite or Pro) makes the runs; this command asks for them, then follows
the backfill's progress until it ends. Ctrl-C while following cancels the backfill
as a whole (its live runs fail; finished ones stay); ``--no-wait`` returns at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import datetime
from typing import Any

from leoflow.commands.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from leoflow.commands.http import ApiError, add_remote_options
from leoflow.commands.http import api_command as _run
from leoflow.commands.http import call as _call
from leoflow.commands.http import client as _client
from leoflow.commands.http import print_json as _print_json
from leoflow.domain.timebounds import OutOfRange, check_moment
from leoflow.domain.words import plural

POLL_SECONDS = 1.0


def add_backfill_command(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "backfill", help="run a DAG for each cron point of a past range (operator)"
    )
    add_remote_options(p)
    p.add_argument("dag_id", nargs="?", metavar="DAG")
    p.add_argument("--from", dest="start", help="first day or instant (ISO 8601; naive is UTC)")
    p.add_argument("--to", dest="end", help="last day (all of it) or instant, included (ISO 8601)")
    p.add_argument("--reprocess-failed", action="store_true", help="rerun points whose runs failed")
    p.add_argument(
        "--max-active-runs", type=int, help="runs live at once (default: the DAG's setting)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the runs it would make")
    p.add_argument("--no-wait", action="store_true", help="do not follow the progress")
    p.add_argument("--status", type=int, metavar="ID", help="print a backfill's progress")
    p.add_argument("--cancel", type=int, metavar="ID", help="cancel a backfill as a whole")
    p.set_defaults(func=cmd_backfill)


def _instant(text: str, flag: str) -> str:
    """The bound as the API and the web UI read it too: ``--to DAY`` is all of DAY."""
    from leoflow.domain.backfill import range_bound

    moment = range_bound(text, end=flag == "--to")
    if not isinstance(moment, datetime):
        raise ApiError(f"{flag} {text!r} is not an ISO 8601 date or time")
    try:
        check_moment(moment)
    except OutOfRange as exc:
        raise ApiError(f"{flag}: {exc}") from exc
    return moment.isoformat()


def _line(backfill: dict[str, Any]) -> str:
    p = backfill["progress"]
    return (
        f"backfill {backfill['pk']} of {backfill['dag_id']}: {backfill['state']}  "
        f"{p['success'] + p['failed']}/{p['total']} done ({p['success']} ok, {p['failed']} "
        f"failed), {p['running']} running, {p['queued']} queued, {p['pending']} to make"
    )


@_run
def cmd_backfill(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.cancel is not None:
            out = _call(client, "POST", f"/api/v1/backfills/{args.cancel}/cancel").json()
            _print_json(out) if args.json else print(_line(out))
            return EXIT_OK
        if args.status is not None:
            out = _call(client, "GET", f"/api/v1/backfills/{args.status}").json()
            _print_json(out) if args.json else print(_line(out["backfill"]))
            return EXIT_OK
        if not (args.dag_id and args.start and args.end):
            print("leoflow backfill: give DAG, --from and --to (or --status/--cancel ID)",
                  file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        body: dict[str, Any] = {
            "from": _instant(args.start, "--from"),
            "to": _instant(args.end, "--to"),
            "reprocess_failed": args.reprocess_failed,
            "dry_run": args.dry_run,
        }
        if args.max_active_runs is not None:
            body["max_active_runs"] = args.max_active_runs
        out = _call(client, "POST", f"/api/v1/dags/{args.dag_id}/backfills", json=body).json()
        if args.json and (args.dry_run or args.no_wait):
            _print_json(out)
            return EXIT_OK
        if args.dry_run:
            dates = out["logical_dates"]
            runs = plural(len(dates), "run")
            print(f"{args.dag_id}: {runs}, at most {out['max_active_runs']} at a time")
            for date in dates:
                print(f"  {date}")
            if out["skipped"]:
                print(f"skipped (a run exists): {len(out['skipped'])}")
            return EXIT_OK
        if not args.json:  # --json: stdout is the one document at the end
            print(_line(out), flush=True)
        if args.no_wait:
            return EXIT_OK
        return _follow(client, int(out["pk"]), args.json)


def _follow(client: Any, pk: int, as_json: bool) -> int:
    """Print each change of progress until the backfill ends; Ctrl-C cancels it."""
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        last = ""
        while True:
            if interrupted:
                out = _call(client, "POST", f"/api/v1/backfills/{pk}/cancel", ok=(200, 409))
                print(f"\nbackfill {pk}: cancelled ({out.status_code})", file=sys.stderr)
                return 130
            backfill = _call(client, "GET", f"/api/v1/backfills/{pk}").json()["backfill"]
            line = _line(backfill)
            if line != last and not as_json:
                print(line, flush=True)
            last = line
            if backfill["state"] != "running":
                if as_json:
                    _print_json(backfill)
                return EXIT_OK if backfill["state"] == "success" else EXIT_FAILED
            time.sleep(POLL_SECONDS)
    finally:
        signal.signal(signal.SIGINT, previous)
