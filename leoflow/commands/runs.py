"""Runs over the API: ``leoflow trigger``, ``runs``, ``cancel`` and ``clear``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from leoflow.commands.common import EXIT_OK
from leoflow.commands.http import (
    ENDED_AND_MESSAGE,
    ApiError,
    api_command,
    api_parser,
    call,
    client,
    get_json,
    print_json,
    url,
    when,
)
from leoflow.commands.tables import table_of
from leoflow.domain.printable import printable


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def _post(args: argparse.Namespace, path: str, say: str, **kw: Any) -> int:
    """POST to ``path``; print the JSON, or ``say`` filled in from it."""
    with client(args) as session:
        data = call(session, "POST", path, **kw).json()
    if args.json:
        print_json(data)
    else:
        print(printable(say.format(**data)))
    return EXIT_OK


@api_command
def cmd_trigger(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.conf:
        try:
            # Strict, as the API is: NaN and Infinity are not JSON.
            body["conf"] = json.loads(args.conf, parse_constant=_not_json)
        except ValueError as exc:
            raise ApiError(f"--conf is not JSON: {exc}") from exc
        if not isinstance(body["conf"], dict):
            raise ApiError("--conf must be a JSON object")
    if args.run_id:
        body["run_id"] = args.run_id
    path = f"/api/v1/dags/{url(args.dag_id)}/runs"
    return _post(args, path, "triggered {dag_id} run {run_id} ({state})", json=body)


RUN_COLUMNS = (
    ("DAG", "dag_id"),
    ("RUN", "run_id"),
    ("STATE", "state"),
    ("CREATED", when("created_at")),
    *ENDED_AND_MESSAGE,
)


@api_command
def cmd_runs(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    for name, value in (("dag_id", args.dag), ("state", args.state), ("before", args.before)):
        if value:
            params[name] = value
    data = get_json(args, "/api/v1/runs", params=params)
    if args.json:
        print_json(data)
        return EXIT_OK
    print(table_of(data["runs"], RUN_COLUMNS))
    if data["next_cursor"] is not None:
        import sys

        print(f"(more: --before {data['next_cursor']})", file=sys.stderr)
    return EXIT_OK


@api_command
def cmd_cancel(args: argparse.Namespace) -> int:
    path = f"/api/v1/dags/{url(args.dag_id)}/runs/{url(args.run_id)}/cancel"
    return _post(args, path, "run {run_id} of {dag_id}: {state} ({message})")


@api_command
def cmd_clear(args: argparse.Namespace) -> int:
    path = (
        f"/api/v1/dags/{url(args.dag_id)}/runs/{url(args.run_id)}/tasks/{url(args.task_id)}/clear"
    )
    with client(args) as session:
        data = call(
            session, "POST", path, ok=(200, 202), params={"downstream": args.downstream}
        ).json()
    if args.json:
        print_json(data)
    elif data.get("pending"):
        print(
            printable(
                f"clear of {', '.join(data['cleared'])} requested (request "
                f"{data['request_id']}); the scheduler stops their live tries and runs them "
                f"again in run {data['run']['run_id']}"
            )
        )
    else:
        print(
            printable(
                f"cleared {', '.join(data['cleared'])}; run {data['run']['run_id']} is running"
            )
        )
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = api_parser(sub, "trigger", "start a run of a DAG through the API (operator)", cmd_trigger)
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("--conf", help="JSON object passed to the run")
    p.add_argument("--run-id", help="the run's id (default: manual__<time>_<hex>)")

    p = api_parser(sub, "runs", "list runs, newest first", cmd_runs, local=True)
    p.add_argument("--dag", help="only this DAG's runs")
    p.add_argument("--state", action="append", choices=["queued", "running", "success", "failed"])
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--before", type=int, help="a cursor printed by the previous page")

    p = api_parser(sub, "cancel", "cancel a queued or running run (operator)", cmd_cancel)
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("run_id", metavar="RUN")

    p = api_parser(
        sub,
        "clear",
        "re-run a task instance: of a finished run at once, of a running run by stopping "
        "its live try (operator)",
        cmd_clear,
    )
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("task_id", metavar="TASK")
    p.add_argument("--downstream", action="store_true", help="also clear every task below it")
