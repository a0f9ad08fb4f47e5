"""The CLI over the HTTP API: ``leoflow dags apply|list|pause|unpause``, ``trigger``,
``runs``, ``tasks [why]``, ``pools``, ``cancel``, ``clear`` and ``logs --server``.

Wiring (in ``leoflow.commands.main.build_parser``)::

    from leoflow.commands.remote import add_remote_commands
    add_remote_commands(sub, dags)          # sub: top-level subparsers, dags: the dags group

and for ``leoflow logs``: ``add_remote_options(logs_parser)``, then call
``remote_logs(args)`` when ``args.server`` (or LEOFLOW_SERVER) is set.

Every command takes ``--server`` (default: LEOFLOW_SERVER, else
http://127.0.0.1:8080), ``--token`` (default: LEOFLOW_TOKEN) and ``--json``. Tables
for people, ``--json`` (the API's own JSON) for scripts. An API error prints its
detail and exits 1. Only httpx is imported, and only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from leoflow.domain.printable import printable

if TYPE_CHECKING:
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8080"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
TIMEOUT = 30.0


class ApiError(Exception):
    """The API answered with an error, or could not be reached."""


# ------------------------------------------------------------------- plumbing


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", help=f"API base URL (default: $LEOFLOW_SERVER or {DEFAULT_SERVER})"
    )
    parser.add_argument("--token", help="API bearer token (default: $LEOFLOW_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


def _server(args: argparse.Namespace) -> str:
    return str(
        getattr(args, "server", None) or os.environ.get("LEOFLOW_SERVER") or DEFAULT_SERVER
    ).rstrip("/")


@contextmanager
def _client(args: argparse.Namespace) -> Iterator[httpx.Client]:
    import httpx

    token = getattr(args, "token", None) or os.environ.get("LEOFLOW_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=_server(args), headers=headers, timeout=TIMEOUT) as client:
        yield client


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        return response.text.strip() or response.reason_phrase
    if isinstance(detail, list):  # FastAPI's request validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', '')}" for d in detail
        )
    if isinstance(detail, dict):
        return str(detail.get("message", detail))
    return str(detail)


def _call(
    client: httpx.Client, method: str, path: str, ok: Sequence[int] = (200, 201, 204), **kw: Any
) -> httpx.Response:
    import httpx

    try:
        response = client.request(method, path, **kw)
    except httpx.HTTPError as exc:
        raise ApiError(f"cannot reach the API at {client.base_url}: {exc}") from exc
    if response.status_code not in ok:
        raise ApiError(f"{response.status_code}: {_detail(response)}")
    return response


def _p(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


def _run(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except ApiError as exc:
            print(f"leoflow: {exc}", file=sys.stderr)
            return EXIT_FAILED

    wrapped.__name__ = func.__name__
    return wrapped


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def _when(value: str | None) -> str:
    if not value:
        return "-"
    return datetime.fromisoformat(value).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    # Cells come from the server (DAG ids, messages): control characters are shown escaped.
    cells = [[str(h) for h in headers]] + [
        ["-" if c is None else printable(str(c)) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)) + "  " + row[-1]
        if len(row) > 1
        else row[0]
        for row in cells
    ).rstrip()


# ----------------------------------------------------------------------- DAGs


@_run
def cmd_dags_apply(args: argparse.Namespace) -> int:
    failed = 0
    results = []
    with _client(args) as client:
        for file in args.files:
            path = Path(file)
            try:
                text = path.read_bytes()
            except OSError as exc:
                print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
                failed += 1
                continue
            response = _call(
                client,
                "POST",
                "/api/v1/dags",
                ok=(200, 201, 422),
                params={"name": _safe_name(path.name)},
                content=text,
                headers={"Content-Type": "application/yaml"},
            )
            body = response.json()
            results.append(body)
            if response.status_code == 422:
                failed += 1
                for problem in body["detail"]["problems"]:
                    where = f"{path}:{problem['line']}" if problem["line"] else str(path)
                    field = f"{problem['field']}: " if problem["field"] else ""
                    print(printable(f"{where}: {field}{problem['message']}"), file=sys.stderr)
                continue
            if not args.json:
                what = (
                    "created" if body["created"] else "changed" if body["changed"] else "unchanged"
                )
                print(
                    printable(f"{body['dag_id']}: {what} ({body['task_count']} tasks) from {path}")
                )
    if args.json:
        _print_json(results)
    return EXIT_FAILED if failed else EXIT_OK


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name).lstrip(".-")
    return (cleaned or "leoflow.yaml")[:200]


@_run
def cmd_dags_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        data = _call(client, "GET", "/api/v1/dags").json()
    if args.json:
        _print_json(data)
        return EXIT_OK
    rows = [
        (
            d["dag_id"],
            "yes" if d["paused"] else "no",
            d["schedule"] or "-",
            d["task_count"],
            "" if d["active"] else "inactive",
            d["fileloc"],
        )
        for d in data["dags"]
    ]
    print(table(("DAG", "PAUSED", "SCHEDULE", "TASKS", "", "FROM"), rows))
    for error in data["import_errors"]:
        print(
            printable(f"\nimport error in {error['fileloc']}:\n{error['error']}", lines=True),
            file=sys.stderr,
        )
    return EXIT_OK


def _pause(paused: bool) -> Callable[[argparse.Namespace], int]:
    @_run
    def cmd(args: argparse.Namespace) -> int:
        action = "pause" if paused else "unpause"
        with _client(args) as client:
            data = _call(client, "POST", f"/api/v1/dags/{_p(args.dag_id)}/{action}").json()
        if args.json:
            _print_json(data)
        else:
            print(f"{data['dag_id']}: {'paused' if data['paused'] else 'unpaused'}")
        return EXIT_OK

    return cmd


# ----------------------------------------------------------------------- runs


@_run
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
    with _client(args) as client:
        data = _call(client, "POST", f"/api/v1/dags/{_p(args.dag_id)}/runs", json=body).json()
    if args.json:
        _print_json(data)
    else:
        print(f"triggered {data['dag_id']} run {data['run_id']} ({data['state']})")
    return EXIT_OK


@_run
def cmd_runs(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.dag:
        params["dag_id"] = args.dag
    if args.state:
        params["state"] = args.state
    if args.before:
        params["before"] = args.before
    with _client(args) as client:
        data = _call(client, "GET", "/api/v1/runs", params=params).json()
    if args.json:
        _print_json(data)
        return EXIT_OK
    rows = [
        (
            r["dag_id"],
            r["run_id"],
            r["state"],
            _when(r["created_at"]),
            _when(r["ended_at"]),
            r["message"] or "",
        )
        for r in data["runs"]
    ]
    print(table(("DAG", "RUN", "STATE", "CREATED", "ENDED", "MESSAGE"), rows))
    if data["next_cursor"] is not None:
        print(f"(more: --before {data['next_cursor']})", file=sys.stderr)
    return EXIT_OK


@_run
def cmd_cancel(args: argparse.Namespace) -> int:
    path = f"/api/v1/dags/{_p(args.dag_id)}/runs/{_p(args.run_id)}/cancel"
    with _client(args) as client:
        data = _call(client, "POST", path).json()
    if args.json:
        _print_json(data)
    else:
        print(
            printable(
                f"run {data['run_id']} of {data['dag_id']}: {data['state']} ({data['message']})"
            )
        )
    return EXIT_OK


@_run
def cmd_clear(args: argparse.Namespace) -> int:
    path = f"/api/v1/dags/{_p(args.dag_id)}/runs/{_p(args.run_id)}/tasks/{_p(args.task_id)}/clear"
    with _client(args) as client:
        data = _call(client, "POST", path, params={"downstream": args.downstream}).json()
    if args.json:
        _print_json(data)
    else:
        print(
            printable(
                f"cleared {', '.join(data['cleared'])}; run {data['run']['run_id']} is running"
            )
        )
    return EXIT_OK


# ------------------------------------------------------------- task instances


@_run
def cmd_tasks(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words[:1] == ["why"] and len(words) == 4:
        return _why(args, *words[1:])
    if len(words) != 2:
        print("usage: leoflow tasks DAG RUN | leoflow tasks why DAG RUN TASK", file=sys.stderr)
        return EXIT_USAGE
    dag_id, run_id = words
    items: list[dict[str, Any]] = []
    with _client(args) as client:
        params: dict[str, Any] = {"limit": 1000}
        while True:
            page = _call(
                client, "GET", f"/api/v1/dags/{_p(dag_id)}/runs/{_p(run_id)}/tasks", params=params
            ).json()
            items += page["task_instances"]
            if page["next_cursor"] is None:
                break
            params["after"] = page["next_cursor"]
    if args.json:
        _print_json(items)
        return EXIT_OK
    rows = [
        (
            t["task_id"],
            t["state"],
            f"{t['try_number']}/{t['max_tries']}",
            t["pool"],
            _when(t["started_at"]),
            _when(t["ended_at"]),
            t["message"] or "",
        )
        for t in items
    ]
    print(table(("TASK", "STATE", "TRY", "POOL", "STARTED", "ENDED", "MESSAGE"), rows))
    return EXIT_OK


def _why(args: argparse.Namespace, dag_id: str, run_id: str, task_id: str) -> int:
    path = f"/api/v1/dags/{_p(dag_id)}/runs/{_p(run_id)}/tasks/{_p(task_id)}/why"
    with _client(args) as client:
        data = _call(client, "GET", path).json()
    if args.json:
        _print_json(data)
        return EXIT_OK
    print(printable(f"{task_id} ({data['state']}): {data['message']}"))
    for other in data["also"]:
        print(printable(f"  also: {other['message']}"))
    return EXIT_OK


# ----------------------------------------------------------------------- pools


@_run
def cmd_pools(args: argparse.Namespace) -> int:
    words = list(args.words) or ["list"]
    action = words[0]
    with _client(args) as client:
        if action == "list" and len(words) == 1:
            data = _call(client, "GET", "/api/v1/pools").json()
            if args.json:
                _print_json(data)
                return EXIT_OK
            rows = [
                (
                    p["name"],
                    p["slots"],
                    p["occupied"],
                    p["queued"],
                    p["running"],
                    p["source"],
                    p["description"],
                )
                for p in data["pools"]
            ]
            print(
                table(
                    ("POOL", "SLOTS", "OCCUPIED", "QUEUED", "RUNNING", "FROM", "DESCRIPTION"), rows
                )
            )
            return EXIT_OK
        if action == "set" and len(words) == 3 and words[2].isdigit():
            name, slots = words[1], int(words[2])
            body: dict[str, Any] = {"slots": slots}
            if args.description is not None:
                body["description"] = args.description
            response = _call(client, "PATCH", f"/api/v1/pools/{_p(name)}", ok=(200, 404), json=body)
            if response.status_code == 404:
                response = _call(client, "POST", "/api/v1/pools", json={"name": name, **body})
            data = response.json()
            if args.json:
                _print_json(data)
            else:
                print(f"pool {data['name']}: {data['slots']} slots ({data['occupied']} occupied)")
            return EXIT_OK
        if action == "delete" and len(words) == 2:
            _call(client, "DELETE", f"/api/v1/pools/{_p(words[1])}")
            if args.json:
                _print_json({"deleted": words[1]})
            else:
                print(f"pool {words[1]}: deleted")
            return EXIT_OK
    print("usage: leoflow pools [list | set NAME SLOTS | delete NAME]", file=sys.stderr)
    return EXIT_USAGE


# ------------------------------------------------------------------------ logs


@_run
def remote_logs(args: argparse.Namespace) -> int:
    """``leoflow logs DAG RUN TASK [--try N] [-f] --server URL``: print a try's log."""
    base = f"/api/v1/dags/{_p(args.dag_id)}/runs/{_p(args.run_id)}/tasks/{_p(args.task_id)}"
    with _client(args) as client:
        try_number = getattr(args, "try_number", None)
        if not try_number:
            ti = _call(client, "GET", base).json()
            try_number = ti["try_number"]
            if try_number < 1:
                raise ApiError(f"task {args.task_id} has not run yet ({ti['state']})")
        params = {"follow": "true"} if getattr(args, "follow", False) else {}
        import httpx

        try:
            with client.stream(
                "GET", f"{base}/logs/{try_number}", params=params, timeout=None
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise ApiError(f"{response.status_code}: {_detail(response)}")
                from leoflow.commands.main import log_writer

                write = log_writer(args)
                for chunk in response.iter_bytes():
                    write(chunk)
                write(None)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the API at {client.base_url}: {exc}") from exc
    return EXIT_OK


# -------------------------------------------------------------------- argparse


def add_remote_commands(sub: Any, dags_sub: Any) -> None:
    """Add the API commands: ``apply``, ``list``, ``pause``, ``unpause`` to the ``dags``
    group ``dags_sub``; ``trigger``, ``runs``, ``tasks``, ``pools``, ``cancel`` and
    ``clear`` to the top-level ``sub``."""

    def parser(group: Any, name: str, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, help=help)
        add_remote_options(p)
        return p

    p = parser(dags_sub, "apply", "send DAG files to the API (validated there; admin)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=cmd_dags_apply)
    p = parser(dags_sub, "list", "DAGs the API knows, and files that failed to load")
    p.set_defaults(func=cmd_dags_list)
    for name, paused in (("pause", True), ("unpause", False)):
        p = parser(dags_sub, name, f"{name} a DAG (operator)")
        p.add_argument("dag_id", metavar="DAG")
        p.set_defaults(func=_pause(paused))

    p = parser(sub, "trigger", "start a run of a DAG through the API (operator)")
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("--conf", help="JSON object passed to the run")
    p.add_argument("--run-id", help="the run's id (default: manual__<time>_<hex>)")
    p.set_defaults(func=cmd_trigger)

    p = parser(sub, "runs", "list runs, newest first")
    p.add_argument("--dag", help="only this DAG's runs")
    p.add_argument("--state", action="append", choices=["queued", "running", "success", "failed"])
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--before", type=int, help="a cursor printed by the previous page")
    p.set_defaults(func=cmd_runs)

    p = parser(sub, "tasks", "a run's task instances; 'tasks why DAG RUN TASK' says why one waits")
    p.add_argument("words", nargs="+", metavar="DAG RUN | why DAG RUN TASK")
    p.set_defaults(func=cmd_tasks)

    p = parser(sub, "pools", "pools and their occupancy; 'set NAME SLOTS', 'delete NAME' (admin)")
    p.add_argument("words", nargs="*", metavar="list | set NAME SLOTS | delete NAME")
    p.add_argument("--description", help="with 'set': the pool's description")
    p.set_defaults(func=cmd_pools)

    p = parser(sub, "cancel", "cancel a queued or running run (operator)")
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("run_id", metavar="RUN")
    p.set_defaults(func=cmd_cancel)

    p = parser(sub, "clear", "re-run a finished task instance of a finished run (operator)")
    p.add_argument("dag_id", metavar="DAG")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("task_id", metavar="TASK")
    p.add_argument("--downstream", action="store_true", help="also clear every task below it")
    p.set_defaults(func=cmd_clear)


def build_parser() -> argparse.ArgumentParser:
    """A parser with only the API commands (and ``logs``)."""
    parser = argparse.ArgumentParser(prog="leoflow")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    dags = sub.add_parser("dags", help="DAGs").add_subparsers(
        dest="dags_command", required=True, metavar="SUBCOMMAND"
    )
    add_remote_commands(sub, dags)
    logs = sub.add_parser("logs", help="print a task's output")
    logs.add_argument("dag_id")
    logs.add_argument("run_id")
    logs.add_argument("task_id")
    logs.add_argument("--try", dest="try_number", type=int)
    logs.add_argument("-f", "--follow", action="store_true")
    add_remote_options(logs)
    logs.set_defaults(func=remote_logs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
